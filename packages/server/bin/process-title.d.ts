/** See process-title.js: the command line with the values of secret flags masked; undefined when it holds none. */
export function maskedCommandLine(args: string[]): string | undefined;
/** See process-title.js: masks this process's own command line (its title) when it holds a secret. */
export function hideSecretArguments(args: string[]): void;
