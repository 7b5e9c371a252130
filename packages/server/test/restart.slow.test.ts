import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createPartner, issueKey } from './client.ts';

const CLI = fileURLToPath(new URL('../bin/tenantry.js', import.meta.url));
const RESTARTS = 8;

/**
 * A supervisor (systemd, a shell loop, a container runtime) starts the server again the moment it
 * died. Started as `npm start` starts it (a shell whose child is the server, in a process group of its
 * own) and killed with kill -9 of the whole group, the server's process outlives its death for a
 * moment as a zombie nobody has reaped yet: the restart must not take that for a live holder.
 */
describe('an immediate restart after kill -9 of the process group', () => {
  const groups: ChildProcess[] = [];
  after(() => {
    for (const group of groups) killGroup(group);
  });

  test(`starts at once, ${RESTARTS} times in a row, with the data written before each kill`, async () => {
    const dataDir = join(mkdtempSync(join(tmpdir(), 'tenantry-restart-')), 'data');
    let server = await startGroup(dataDir, groups);
    const operatorToken = readFileSync(join(dataDir, 'operator-token'), 'utf8').trim();
    for (let round = 0; round < RESTARTS; round++) {
      const urls = { ...server.urls, operatorToken };
      await createPartner(urls, `part-${round}`);
      await issueKey(urls, `part-${round}`);
      killGroup(server.group);
      await once(server.group, 'exit');
      // No pause: the restart runs while the killed server may still be an unreaped zombie.
      server = await startGroup(dataDir, groups);
    }
    const urls = { ...server.urls, operatorToken };
    const listed = await fetch(`${urls.operatorUrl}/api/operator/v1/partners?limit=200`, {
      headers: { authorization: `Bearer ${operatorToken}` },
    });
    const partners = ((await listed.json()) as { data: { id: string }[] }).data.map((p) => p.id);
    for (let round = 0; round < RESTARTS; round++) assert.ok(partners.includes(`part-${round}`), `partner p${round} survived`);
  });
});

function killGroup(group: ChildProcess): void {
  try {
    if (group.pid !== undefined) process.kill(-group.pid, 'SIGKILL');
  } catch {}
}

/** `sh -c '<server>; ...'`: the shell stays the server's parent, as npm's does. */
async function startGroup(dataDir: string, groups: ChildProcess[]) {
  const group = spawn('sh', ['-c', '"$0" "$@"; exit $?', process.execPath, CLI, 'serve'], {
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      PATH: process.env.PATH ?? '',
      TENANTRY_DATA_DIR: dataDir,
      TENANTRY_LISTEN: '127.0.0.1:0',
      TENANTRY_OPERATOR_LISTEN: '127.0.0.1:0',
      TENANTRY_SANDBOX_DELAY_MS: '0',
    },
  });
  groups.push(group);
  let output = '';
  const urls = await new Promise<{ partnerUrl: string; operatorUrl: string }>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString('utf8');
      const line = output.split('\n').find((l) => l.includes('"tenantry serving"'));
      if (!line) return;
      const parsed = JSON.parse(line) as { partner_api: string; operator_api: string };
      group.stdout?.off('data', onData);
      group.stdout?.resume();
      group.stderr?.resume();
      resolve({ partnerUrl: parsed.partner_api, operatorUrl: parsed.operator_api });
    };
    group.stdout?.on('data', onData);
    group.stderr?.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8');
    });
    group.once('exit', (code) => reject(new Error(`tenantry serve exited with ${code}: ${output}`)));
  });
  return { group, urls };
}
