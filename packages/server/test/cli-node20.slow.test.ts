import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, copyFileSync, mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { MALLOC_ENV, NODE_FLAGS } from '../bin/process-settings.js';
import { SETTINGS, type Setting } from '../src/config/settings.ts';
import { findNode20, NO_NODE20, pathWithNodeFirst } from './node20.ts';

/**
 * The installed `tenantry` command as a user's shell runs it: with the machine's Node 20 first on PATH,
 * not the project's Node 24 that npm scripts put there. The command finds the project's Node 24 and
 * runs on it; where there is none, it says in one line what it needs.
 */
const BIN = fileURLToPath(new URL('../../../node_modules/.bin/tenantry', import.meta.url));
const BIN_SOURCE = fileURLToPath(new URL('../bin/tenantry.js', import.meta.url));
const NODE20 = findNode20();
/** The project's Node 24 (the `node` npm package). */
const NODE24 = fileURLToPath(new URL('../../../node_modules/node/bin/node', import.meta.url));

function run(file: string, args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(file, args, { env, timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr });
    });
  });
}

describe('tenantry on the machine’s Node 20', { skip: NODE20 ? false : NO_NODE20 }, () => {
  const shell = () => ({ PATH: pathWithNodeFirst(NODE20 ?? ''), HOME: process.env.HOME ?? '/' });

  test('./node_modules/.bin/tenantry --version runs on the project’s Node 24', async () => {
    const which = await run('/bin/sh', ['-c', 'node --version'], shell());
    assert.match(which.stdout, /^v20\./, 'the shell’s node is Node 20');
    const result = await run(BIN, ['--version'], shell());
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout.trim(), /^tenantry \d+\.\d+\.\d+ \(Node\.js v24\.\d+\.\d+\)$/);
  });

  test('tenantry serve --help lists every setting with its variable, flag and default', async () => {
    const result = await run(BIN, ['serve', '--help'], shell());
    assert.equal(result.code, 0, result.stderr);
    for (const setting of SETTINGS as readonly Setting[]) {
      const shown = setting.fallback ?? setting.defaultText ?? 'unset';
      const flag = setting.flag ? ` \\(${setting.flag.split(' ')[0]}\\)` : '';
      assert.match(
        result.stdout,
        new RegExp(`${setting.variable}${flag}\\n.*\\n +default: ${shown.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\n`),
      );
    }
    assert.match(result.stdout, /--listen <host:port> +partner API address \(TENANTRY_LISTEN\)/);
  });

  test('tenantry serve started through Node 20 serves, and stops cleanly on SIGTERM sent to the command', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'tenantry-node20-'));
    const child = spawn(BIN, ['serve', '--listen', '127.0.0.1:0', '--operator-listen', '127.0.0.1:0', '--data-dir', dataDir], {
      env: { ...shell(), TENANTRY_SANDBOX_DELAY_MS: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    const partnerUrl = await new Promise<string>((resolve, reject) => {
      child.stdout.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        const line = output.split('\n').find((l) => l.includes('"tenantry serving"'));
        if (line) resolve((JSON.parse(line) as { partner_api: string }).partner_api);
      });
      child.once('exit', (code) => reject(new Error(`exited with ${code}: ${output}`)));
    });
    assert.equal((await fetch(`${partnerUrl}/healthz`)).status, 200);
    // One process, the project's Node 24 itself (the shell's part of the command execs it),
    // started with the Node flags and allocator settings of `npm start` and the chart.
    const pid = child.pid ?? 0;
    assert.equal(realpathSync(`/proc/${pid}/exe`), realpathSync(NODE24));
    const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    assert.deepEqual(argv.slice(1, 1 + NODE_FLAGS.length), NODE_FLAGS);
    const environ = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
    for (const [name, value] of Object.entries(MALLOC_ENV)) assert.ok(environ.includes(`${name}=${value}`), `${name}=${value}`);
    child.kill('SIGTERM');
    const [code] = (await once(child, 'exit')) as [number | null];
    assert.equal(code, 0, output);
    assert.match(output, /tenantry stopped/, 'the server itself received the signal and drained');
    rmSync(dataDir, { recursive: true, force: true });
  });

  test('where no Node 24 can be found, the command says in one line what it needs', async () => {
    // The command alone, away from the repository: nothing resolves the `node` package from there.
    const dir = mkdtempSync(join(tmpdir(), 'tenantry-bin-'));
    const lonely = join(dir, 'tenantry.mjs');
    copyFileSync(BIN_SOURCE, lonely);
    chmodSync(lonely, 0o755);
    // Run by Node 20, and run as a command (its shell part finds no Node 24 and hands it to the PATH's node).
    const results = [await run(NODE20 ?? '', [lonely, '--version'], shell()), await run(lonely, ['--version'], shell())];
    rmSync(dir, { recursive: true, force: true });
    for (const result of results) {
      assert.equal(result.code, 1);
      assert.equal(result.stdout, '');
      assert.match(
        result.stderr,
        /^tenantry: needs Node\.js 24 or later, and this is v20\.\d+\.\d+; run npm ci .* or put Node 24 first on PATH\n$/,
      );
    }
  });
});
