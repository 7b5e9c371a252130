/** See process-settings.js: the Node flags a `tenantry serve` process starts with. */
export const NODE_FLAGS: readonly string[];
/** See process-settings.js: glibc's allocator settings a `tenantry serve` process starts with. */
export const MALLOC_ENV: Readonly<Record<'MALLOC_MMAP_THRESHOLD_' | 'MALLOC_ARENA_MAX', string>>;
