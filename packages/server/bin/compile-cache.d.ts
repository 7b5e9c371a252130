/** See compile-cache.js: turns Node's compile cache on in the user's own cache directory; the directory, or undefined. */
export function useCompileCache(env?: NodeJS.ProcessEnv): string | undefined;
