import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { delimiter } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { runCli } from './cli-runner.ts';
import { startTestServer, type TestServer, testDatabases } from './harness.ts';
import { eventually, partnerWithModes, type Tokens } from './provisioning.ts';

/**
 * `tenantry listen` as a process a person starts and stops: what it prints when it forwards, what `ps`
 * shows of its key, and that stopping it (a signal to it, or to the `npx` that started it) stops it.
 */
const CLI = fileURLToPath(new URL('../src/cli/main.ts', import.meta.url));
const REPOSITORY = fileURLToPath(new URL('../../../', import.meta.url));
const npx = (process.env.PATH ?? '').split(delimiter).some((dir) => {
  try {
    return readdirSync(dir).includes('npx');
  } catch {
    return false;
  }
});

/** Every running process's command line, by process id (Linux's /proc). */
function commandLines(): Map<number, string> {
  const lines = new Map<number, string>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      lines.set(Number(entry), readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ').trim());
    } catch {
      // Gone meanwhile.
    }
  }
  return lines;
}

/** Collects a child's output; `text()` is all of it so far. */
function output(child: ChildProcess): { text: () => string } {
  let text = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    text += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    text += chunk.toString();
  });
  return { text: () => text };
}

const target = testDatabases()[0];
if (target) {
  describe('tenantry listen, started and stopped', () => {
    let server: TestServer;
    let acme: Tokens;
    let hooks: ReturnType<typeof createServer>;
    let hooksUrl: string;
    const children: ChildProcess[] = [];

    before(async () => {
      server = await startTestServer(target);
      acme = await partnerWithModes(server, 'stopping');
      hooks = createServer((request, response) => {
        request.resume();
        request.on('end', () => response.writeHead(204).end());
      }).listen(0, '127.0.0.1');
      await once(hooks, 'listening');
      hooksUrl = `http://127.0.0.1:${(hooks.address() as { port: number }).port}/hooks`;
    });
    after(async () => {
      for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
      // A listener left behind (the test failed) would hold the server's event stream open.
      for (const [pid, line] of commandLines())
        if (line.startsWith('tenantry listen') && line.includes(server.partnerUrl)) process.kill(pid);
      hooks.close();
      await server.stop();
    });

    test('each forwarded event is a line with the time it was forwarded; ps shows no key; SIGTERM stops it', async () => {
      const listener = spawn(
        process.execPath,
        [CLI, 'listen', '--api-key', acme.testKey, '--api-url', server.partnerUrl, '--forward-to', hooksUrl],
        {
          env: { PATH: process.env.PATH ?? '' },
        },
      );
      children.push(listener);
      const seen = output(listener);
      await eventually(
        async () => seen.text(),
        (text) => text.includes('Ready:'),
      );
      const shown = readFileSync(`/proc/${listener.pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
      assert.ok(!shown.includes(acme.testKey), `ps shows the key: ${shown}`);
      assert.match(shown, /^tenantry listen --api-key \*\*\* --api-url /);

      const triggered = await runCli(['trigger', 'customer.ready', '--api-key', acme.testKey, '--api-url', server.partnerUrl], {});
      assert.equal(triggered.code, 0, triggered.stderr);
      const line = await eventually(
        async () => /^(\d\d):(\d\d):(\d\d) {2}customer\.ready +dlv_\w+ {2}forwarded → 204 \(\d+ ms\)$/m.exec(seen.text()),
        (match) => match !== null,
      );
      // The time is the local time of the forwarding: now, give or take the test's own seconds.
      const secondsOfDay = (d: Date) => d.getHours() * 3600 + d.getMinutes() * 60 + d.getSeconds();
      const printed = Number(line?.[1]) * 3600 + Number(line?.[2]) * 60 + Number(line?.[3]);
      const apart = Math.abs(secondsOfDay(new Date()) - printed);
      assert.ok(Math.min(apart, 86_400 - apart) < 60, line?.[0] ?? '');

      listener.kill('SIGTERM');
      const [code] = (await Promise.race([
        once(listener, 'exit'),
        new Promise((_, reject) => setTimeout(() => reject(new Error(`still running: ${seen.text()}`)), 10_000)),
      ])) as [number | null];
      assert.equal(code, 0);
    });

    test('stopping the npx that started it stops the listener too, and no process shows the key', {
      skip: !npx && 'no npx on PATH',
    }, async () => {
      const started = spawn('npx', ['tenantry', 'listen', '--api-key', acme.testKey, '--api-url', server.partnerUrl], {
        cwd: REPOSITORY,
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp' },
      });
      children.push(started);
      const seen = output(started);
      await eventually(
        async () => seen.text(),
        (text) => text.includes('Ready:'),
        30_000,
      );
      const listeners = () =>
        [...commandLines()].filter(([, line]) => line.startsWith('tenantry listen') && line.includes(server.partnerUrl));
      assert.equal(listeners().length, 1, 'the listener runs, under its masked title');
      assert.ok(!listeners()[0]?.[1].includes(acme.testKey));

      // npm passes the signal to its shell only; the listener sees its parent go, and stops.
      started.kill('SIGTERM');
      await eventually(
        async () => listeners(),
        (left) => left.length === 0,
        10_000,
      );
      assert.ok(![...commandLines().values()].some((line) => line.includes(acme.testKey)), 'no process holds the key');
    });
  });
}
