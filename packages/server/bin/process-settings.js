// How a `tenantry serve` process is started, in one place for the launchers that are JavaScript or
// TypeScript (this directory's tenantry.js, the tests' and the bench's spawned servers). `npm start`
// (package.json) and the Helm chart (values.yaml) write the same values; a test holds all four together.

/**
 * Node flags. V8 sizes its heap when the process starts, so they cannot be set from inside it.
 * `--max-semi-space-size=16`: V8's young generation capped at 16 MB a half; Node 24 lets it grow to 64 MB
 * under steady load and keeps it. Not smaller: a read of PostgreSQL allocates about
 * 220 KB, and at 4 MB a half its collections cost it more CPU.
 */
export const NODE_FLAGS = ['--max-semi-space-size=16'];

/**
 * The C library's allocator, read by glibc when the process starts (ignored by other C libraries).
 * `MALLOC_MMAP_THRESHOLD_`: blocks of 128 KiB and more always come from their own mappings and go back
 * to the system when freed. Left to itself glibc raises that threshold after the first large free, and
 * the embedded database's start then leaves tens of MB of freed, fragmented heap resident for good.
 * `MALLOC_ARENA_MAX`: two heaps shared by all threads instead of one per thread, up to 8 per core.
 */
export const MALLOC_ENV = { MALLOC_MMAP_THRESHOLD_: '131072', MALLOC_ARENA_MAX: '2' };
