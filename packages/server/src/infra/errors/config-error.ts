/** A setting that is missing or wrong: start-up stops with one line per problem, naming the setting. */
export class ConfigError extends Error {
  readonly variable: string;

  /** `more`: further problems found at the same time, one line each. */
  constructor(variable: string, problem: string, more: Array<{ variable: string; problem: string }> = []) {
    super([`${variable}: ${problem}`, ...more.map((p) => `${p.variable}: ${p.problem}`)].join('\n'));
    this.name = 'ConfigError';
    this.variable = variable;
  }
}
