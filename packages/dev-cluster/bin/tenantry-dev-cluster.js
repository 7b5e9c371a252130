#!/usr/bin/env node
// `tenantry-dev-cluster`: its TypeScript runs on Node 24 (type stripping). On an older `node`, this file
// finds the Node 24 the repository installed (the `node` npm package) and runs itself on it, or says in
// one line what is needed.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const NEEDED = 24;
const major = (version) => Number(String(version).replace(/^v/, '').split('.')[0]);

if (major(process.versions.node) >= NEEDED) {
  await import('../src/main.ts');
} else {
  let node;
  try {
    const manifest = createRequire(import.meta.url).resolve('node/package.json');
    const bin = join(dirname(manifest), 'bin', 'node');
    if (major(JSON.parse(readFileSync(manifest, 'utf8')).version) >= NEEDED && existsSync(bin)) node = bin;
  } catch {}
  if (node === undefined) {
    process.stderr.write(
      `tenantry-dev-cluster: needs Node.js ${NEEDED} or later, and this is ${process.version}; run npm ci in the tenantry repository\n`,
    );
    process.exit(1);
  }
  const child = spawn(node, [fileURLToPath(import.meta.url), ...process.argv.slice(2)], { stdio: 'inherit' });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => child.kill(signal));
  child.on('exit', (code, signal) => process.exit(signal ? 1 : (code ?? 1)));
}
