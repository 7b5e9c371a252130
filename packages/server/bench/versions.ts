/**
 * BENCH_ONLY=versions: this checkout against other revisions, head to head, on PostgreSQL.
 *
 * BENCH_VERSIONS names the revisions (git revisions separated by `|`; by default `HEAD`, so that the
 * working tree is measured against its last commit). Each is checked out into a temporary git worktree
 * that shares this checkout's `node_modules`; every version's `tenantry serve` runs on a database of its
 * own (their migrations may differ), all at once, and they are loaded in turn round after round:
 * `GET /customers/{id}` and `GET /auth/whoami`, as BENCH_ONLY=flags does for Node flags. Separate runs of
 * the bench, one version after the other, moved by more than most changes on this shared machine;
 * loaded in alternation, a neighbour's burst falls on every version alike. Each version's line gives its
 * median round's throughput and CPU a request (split into the main thread and V8's helper threads), and
 * its CPU as a ratio to this checkout's. `BENCH_DURATION_S=2 BENCH_ROUNDS=10` gives ten comparisons in
 * about two minutes.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnServe } from '../test/serve-process.ts';
import { benchServeEnv, headToHead, partnerToken, scratchDir } from './common.ts';
import { benchPartner, burstCreates } from './operations.ts';

const REVISIONS = (process.env.BENCH_VERSIONS ?? 'HEAD')
  .split('|')
  .map((revision) => revision.trim())
  .filter(Boolean);
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

interface Version {
  label: string;
  /** The `tenantry` entry of the version's checkout. */
  cli: string;
  remove(): void;
}

/** A database of its own, dropped after the comparison. */
type MakeDatabase = () => Promise<{ url: string; drop(): Promise<void> } | undefined>;

export async function benchVersions(label: string, makeDatabase: MakeDatabase): Promise<string[]> {
  const git = (...args: string[]) => execFileSync('git', ['-C', ROOT, ...args], { encoding: 'utf8' }).trim();
  const versions: Version[] = [{ label: 'this checkout', cli: join(ROOT, 'packages/server/bin/tenantry.js'), remove: () => {} }];
  const databases: { url: string; drop(): Promise<void> }[] = [];
  const servers: Awaited<ReturnType<typeof spawnServe>>[] = [];
  try {
    for (const revision of REVISIONS) {
      const commit = git('rev-parse', '--verify', `${revision}^{commit}`);
      const dir = mkdtempSync(join(tmpdir(), 'tenantry-bench-version-'));
      git('worktree', 'add', '--detach', '--force', dir, commit);
      symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
      versions.push({
        label: `${revision} (${commit.slice(0, 7)})`,
        cli: join(dir, 'packages/server/bin/tenantry.js'),
        remove: () => {
          git('worktree', 'remove', '--force', dir);
          rmSync(dir, { recursive: true, force: true });
        },
      });
    }
    for (const version of versions) {
      const database = await makeDatabase();
      if (!database) return [`${label}: PostgreSQL is unreachable: the versions are not compared.`];
      databases.push(database);
      const dataDir = scratchDir('data');
      servers.push(
        await spawnServe(benchServeEnv({ TENANTRY_DATA_DIR: dataDir, TENANTRY_DATABASE_URL: database.url }), {
          keepOutput: false,
          cli: version.cli,
        }),
      );
    }
    // Each server has its own database: a partner, a customer and a token on each.
    const tokens: string[] = [];
    for (const server of servers) {
      const partner = await benchPartner(server, 'bench');
      await burstCreates(label, partner.api, 1);
      tokens.push(await partnerToken(server, partner.key));
    }
    const contenders = servers.map((server, i) => ({ server, token: tokens[i] ?? '', name: `at ${versions[i]?.label}` }));
    return await headToHead(label, contenders, "this checkout's");
  } finally {
    for (const server of servers) await server.stop();
    for (const database of databases) await database.drop();
    for (const version of versions) version.remove();
  }
}
