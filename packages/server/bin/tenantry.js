#!/bin/sh
':' /*
# The shell's part (the JavaScript below skips it as a comment): a machine's own `node` is
# often older than 24 (Node 20 here), and starting it only to start Node 24 costs 100-200 ms and a second
# process. So the shell finds the Node 24 the project installed (node_modules/node, looked up from this
# file's real directory as Node resolves packages) and runs this file on it, in this process (exec), with
# the settings `npm start` and the chart use (process-settings.js; the user's own environment wins). With
# none found, the machine's `node` runs it, and the JavaScript below does what it can.
self=$0
while [ -L "$self" ]; do
  link=$(readlink "$self")
  case $link in /*) self=$link ;; *) self=$(dirname "$self")/$link ;; esac
done
dir=$(cd "$(dirname "$self")" && pwd -P)
while :; do
  if [ -x "$dir/node_modules/node/bin/node" ]; then
    MALLOC_MMAP_THRESHOLD_=${MALLOC_MMAP_THRESHOLD_-131072} MALLOC_ARENA_MAX=${MALLOC_ARENA_MAX-2}
    export MALLOC_MMAP_THRESHOLD_ MALLOC_ARENA_MAX
    exec "$dir/node_modules/node/bin/node" --max-semi-space-size=16 "$self" "$@"
  fi
  [ "$dir" = / ] && break
  dir=$(dirname "$dir")
done
exec node "$self" "$@"
*/
// The installed `tenantry` command. The CLI is TypeScript that Node 24 runs directly (type stripping).
// This file stays plain JavaScript that older Node versions can parse, because it may still be run by
// an older `node` (`node bin/tenantry.js`, or the shell's part above finding no Node 24): then it finds
// the Node 24 the project installed (the `node` npm package, a dev dependency) and runs the CLI on it,
// or says in one line what is needed. On Node 24 it imports the CLI in this process: no second process.
// Node's compile cache is turned on before any TypeScript is loaded (compile-cache.js).
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const NEEDED = 24;
const major = (version) => Number(String(version).replace(/^v/, '').split('.')[0]);

/** The Node binary of the `node` npm package, found as Node resolves packages from here; or undefined. */
function projectNode() {
  try {
    const manifest = createRequire(import.meta.url).resolve('node/package.json');
    const bin = join(dirname(manifest), 'bin', process.platform === 'win32' ? 'node.exe' : 'node');
    const { version } = JSON.parse(readFileSync(manifest, 'utf8'));
    return major(version) >= NEEDED && existsSync(bin) ? bin : undefined;
  } catch {
    return undefined;
  }
}

if (major(process.versions.node) >= NEEDED) {
  // The compile cache first, so that it covers every module of the CLI (compile-cache.js).
  (await import('./compile-cache.js')).useCompileCache();
  await import('../src/cli/main.ts');
} else {
  const node = projectNode();
  if (node === undefined) {
    process.stderr.write(
      `tenantry: needs Node.js ${NEEDED} or later, and this is ${process.version}; run npm ci in the tenantry repository (it installs Node ${NEEDED} into node_modules) or put Node ${NEEDED} first on PATH\n`,
    );
    process.exit(1);
  }
  // This file again, on Node 24: it turns the compile cache on before the CLI's TypeScript loads.
  // Started as `npm start` and the chart start the server (process-settings.js); the user's own
  // environment wins.
  const { NODE_FLAGS, MALLOC_ENV } = await import('./process-settings.js');
  // Neither this process nor the CLI shows a secret flag's value in `ps` (process-title.js); the CLI
  // knows from TENANTRY_LAUNCHER_PID that it has a parent that may be killed without passing a signal on.
  (await import('./process-title.js')).hideSecretArguments(process.argv.slice(2));
  const child = spawn(node, [...NODE_FLAGS, fileURLToPath(import.meta.url), ...process.argv.slice(2)], {
    stdio: 'inherit',
    env: { ...MALLOC_ENV, ...process.env, TENANTRY_LAUNCHER_PID: String(process.pid) },
  });
  // Signals sent to this process reach the CLI too (its handlers are idempotent: a terminal's Ctrl-C reaches both).
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => child.kill(signal));
  child.on('error', (error) => {
    process.stderr.write(`tenantry: cannot run ${node}: ${error.message}\n`);
    process.exit(1);
  });
  child.on('exit', (code, signal) => {
    if (signal) {
      // Die of the same signal, so a shell sees what the CLI saw.
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
    } else process.exit(code ?? 1);
  });
}
