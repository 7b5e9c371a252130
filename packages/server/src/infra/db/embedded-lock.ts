import { randomBytes } from 'node:crypto';
import { readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * One process opens an embedded (PGlite) database: a second one would see only its own
 * writes, and one of the two would lose them at the next restart. The lock is a file beside
 * the database, created exclusively, naming the process that holds it. A lock left by a
 * process that died (kill -9, a crash, a container restart) is detected from the process
 * table and taken over; two processes taking over at once are serialised by a second file.
 *
 * A lock the kernel drops with its holder (flock, fcntl) would need no process table, but Node
 * has no API for one, and the packages that add it build native code. So a holder counts as
 * dead when its pid is gone, when the pid now belongs to a process started at another time, or
 * when it is a zombie: a process killed with its parent (kill -9 of a process group) stays in
 * the table, holding nothing, until someone reaps it, and a supervisor restarts in that window.
 */
export interface LockHolder {
  pid: number;
  host: string;
  /** When the holder took the lock. */
  since: string;
  /** The holder's start time in clock ticks since boot (Linux), to tell a reused pid apart. */
  startTicks: string | null;
  /** Random: a release removes only its own lock. */
  nonce: string;
}

export class EmbeddedDatabaseLockedError extends Error {
  override name = 'EmbeddedDatabaseLockedError';
  readonly holder: LockHolder;

  constructor(dir: string, lockPath: string, holder: LockHolder) {
    const sameHost = holder.host === hostname();
    super(
      `the embedded database in ${dir} is in use by process ${holder.pid}${sameHost ? '' : ` on host ${holder.host}`} (since ${holder.since}); ` +
        `stop that process or give this one another TENANTRY_DATA_DIR${sameHost ? '' : `; if that process is gone, remove ${lockPath}`}`,
    );
    this.holder = holder;
  }
}

export interface EmbeddedLock {
  readonly path: string;
  release(): void;
}

const TAKEOVER_STALE_MS = 10_000;
/** A lock file still being written by its creator (empty or partial) for longer than this is abandoned. */
const PARTIAL_STALE_MS = 5_000;

export async function acquireEmbeddedLock(dir: string): Promise<EmbeddedLock> {
  const path = `${dir}.lock`;
  const me: LockHolder = {
    pid: process.pid,
    host: hostname(),
    since: new Date().toISOString(),
    startTicks: startTicks(process.pid),
    nonce: randomBytes(8).toString('hex'),
  };
  for (let attempt = 0; attempt < 200; attempt++) {
    try {
      writeFileSync(path, JSON.stringify(me), { flag: 'wx', mode: 0o600 });
      return lockHandle(path, me);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const holder = readHolder(path);
    if (holder === 'gone') continue;
    if (holder === 'partial') {
      if (ageMs(path) < PARTIAL_STALE_MS) {
        await sleep(25);
        continue;
      }
    } else if (isAlive(holder)) {
      throw new EmbeddedDatabaseLockedError(dir, path, holder);
    }
    await takeOver(path, holder);
  }
  throw new Error(`could not take the lock ${path}: other processes keep taking it`);
}

/** Removes a dead holder's lock, unless someone else replaced it meanwhile. */
async function takeOver(path: string, stale: LockHolder | 'partial'): Promise<void> {
  const guard = `${path}.takeover`;
  try {
    writeFileSync(guard, String(process.pid), { flag: 'wx', mode: 0o600 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    // Another process is taking over; a guard left by a process killed in these few lines is removed.
    if (ageMs(guard) > TAKEOVER_STALE_MS) removeQuietly(guard);
    await sleep(25);
    return;
  }
  try {
    const now = readHolder(path);
    const unchanged = stale === 'partial' ? now === 'partial' : typeof now === 'object' && now.nonce === stale.nonce;
    if (unchanged) removeQuietly(path);
  } finally {
    removeQuietly(guard);
  }
}

function lockHandle(path: string, me: LockHolder): EmbeddedLock {
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    process.off('exit', release);
    const holder = readHolder(path);
    if (typeof holder === 'object' && holder.nonce === me.nonce) removeQuietly(path);
  };
  // A process that exits without closing the database (an uncaught error) still frees the lock.
  process.on('exit', release);
  return { path, release };
}

function readHolder(path: string): LockHolder | 'partial' | 'gone' {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 'gone';
    throw error;
  }
  try {
    const holder = JSON.parse(text) as LockHolder;
    return typeof holder.pid === 'number' && typeof holder.nonce === 'string' ? holder : 'partial';
  } catch {
    return 'partial';
  }
}

function isAlive(holder: LockHolder): boolean {
  // On another host nothing can be checked from here: the lock stands.
  if (holder.host !== hostname()) return true;
  // Our own pid cannot hold it (we are asking for it): a restarted container reuses its pid.
  if (holder.pid === process.pid) return false;
  try {
    process.kill(holder.pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return false;
  }
  const stat = procStat(holder.pid);
  // With /proc there, a pid it no longer lists has just exited; without /proc nothing more is known.
  if (stat === null) return procStat(process.pid) === null;
  // Z: exited, not yet reaped; X: being removed. Neither runs code or holds the database's files.
  if (stat.state === 'Z' || stat.state === 'X' || stat.state === 'x') return false;
  return !(holder.startTicks !== null && stat.startTicks !== holder.startTicks);
}

/** When the process started, in clock ticks since boot (Linux); null where /proc is not there. */
function startTicks(pid: number): string | null {
  return procStat(pid)?.startTicks ?? null;
}

/** Fields 3 (state) and 22 (start time) of /proc/<pid>/stat; null where /proc is not there or the pid is gone. */
function procStat(pid: number): { state: string; startTicks: string } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: count fields after its closing one.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const [state, ticks] = [fields[0], fields[19]];
    return state === undefined || ticks === undefined ? null : { state, startTicks: ticks };
  } catch {
    return null;
  }
}

function ageMs(path: string): number {
  try {
    return Date.now() - statSync(path).mtimeMs;
  } catch {
    return 0;
  }
}

function removeQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {}
}
