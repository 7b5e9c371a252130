// A secret given on the command line (`--api-key tnt_...`, `--secret <hex>`) sits in the process's argv,
// which `ps` and /proc/<pid>/cmdline show every local user for as long as the process runs. A `tenantry`
// process that got one takes as its title (what both show) the same command line with the values masked.
// Plain JavaScript: the launcher uses it too, on whatever Node runs it.

const SECRET_FLAGS = ['--api-key', '--secret'];

/**
 * The command line with the values of secret flags masked; undefined when it holds none.
 *
 * @param {string[]} args the arguments after the script (`process.argv.slice(2)`)
 * @returns {string | undefined}
 */
export function maskedCommandLine(args) {
  let masked = false;
  const shown = args.map((arg, i) => {
    if (i > 0 && SECRET_FLAGS.includes(args[i - 1] ?? '')) {
      masked = true;
      return '***';
    }
    const eq = arg.indexOf('=');
    if (eq > 0 && SECRET_FLAGS.includes(arg.slice(0, eq))) {
      masked = true;
      return `${arg.slice(0, eq)}=***`;
    }
    return arg;
  });
  return masked ? ['tenantry', ...shown].join(' ') : undefined;
}

/**
 * Masks this process's own command line when it holds a secret.
 *
 * @param {string[]} args
 */
export function hideSecretArguments(args) {
  const title = maskedCommandLine(args);
  if (title !== undefined) process.title = title;
}
