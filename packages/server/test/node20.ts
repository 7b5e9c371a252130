import { execFileSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { delimiter, join, sep } from 'node:path';

/**
 * The machine's own Node 20, which users run the `tenantry` command and the SDK with: the one named by
 * TENANTRY_TEST_NODE20 (`.ci/run` installs it), else the first `node` on PATH outside a
 * `node_modules/.bin` (npm puts the project's Node 24 first there) that reports v20.
 */
export function findNode20(env: Record<string, string | undefined> = process.env): string | undefined {
  if (env.TENANTRY_TEST_NODE20) return env.TENANTRY_TEST_NODE20;
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (dir === '' || dir.includes(`node_modules${sep}.bin`)) continue;
    const candidate = join(dir, 'node');
    try {
      accessSync(candidate, constants.X_OK);
      if (execFileSync(candidate, ['--version'], { encoding: 'utf8' }).startsWith('v20.')) return candidate;
    } catch {
      // Not there, or not runnable: look further.
    }
  }
  return undefined;
}

/** Why a Node 20 test is skipped, when none is found. */
export const NO_NODE20 = 'no Node 20 found: set TENANTRY_TEST_NODE20 (.ci/run installs one) or put a Node 20 on PATH';

/** PATH with the project's `node_modules/.bin` directories removed and `node` first: a user's shell. */
export function pathWithNodeFirst(node: string, env: Record<string, string | undefined> = process.env): string {
  const rest = (env.PATH ?? '').split(delimiter).filter((dir) => dir !== '' && !dir.includes(`node_modules${sep}.bin`));
  return [node.slice(0, node.lastIndexOf(sep)), ...rest].join(delimiter);
}
