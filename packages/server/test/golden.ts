import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('./golden/', import.meta.url));

/** Set by `npm run golden:update`: tests write what they produced instead of comparing with it. */
export const updatingGoldens = process.env.TENANTRY_UPDATE_GOLDEN === '1';

/**
 * Compares `actual` with the stored file test/golden/<name>. `npm run golden:update` rewrites the files, so a
 * change of output shows up as a diff of those files in review.
 */
export async function assertGolden(name: string, actual: string): Promise<void> {
  const path = join(ROOT, name);
  if (updatingGoldens) {
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, actual);
    return;
  }
  assert.ok(existsSync(path), `no golden file ${path}: run npm run golden:update and review the new file`);
  const expected = await readFile(path, 'utf8');
  assert.equal(actual, expected, `output differs from ${path} (npm run golden:update rewrites it; review the diff)`);
}
