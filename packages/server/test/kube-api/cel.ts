import { type CelValue, celEnv, isCelError, isCelList, isCelMap, isCelUint, parse, plan } from '@bufbuild/cel';
import { strings } from '@bufbuild/cel/ext';

/**
 * CEL for the double: CRD `x-kubernetes-validations` rules and ValidatingAdmissionPolicy expressions are
 * evaluated by @bufbuild/cel (cel-es, a conformant CEL implementation), with its `strings` extension as
 * the API server enables Kubernetes' `ext.Strings`. The standard language covers what Kube-DC's rules and
 * policies use: `has()`, `in`, `size()`, `all`/`exists`/`exists_one`/`map`/`filter`, `startsWith`/
 * `endsWith`/`contains`/`matches`, `dyn()`, field and index access on maps and lists.
 *
 * Values cross in as JSON: objects become CEL maps (so `has(x.f)`, `x.f`, `x['f']` and `'f' in x` all
 * work), integral numbers CEL ints, other numbers doubles; results come back as JSON.
 */

export type CelOutcome = { ok: true; value: unknown } | { ok: false; error: string };

/** A compiled expression, evaluated as often as needed. */
export interface CelProgram {
  readonly expression: string;
  /** Whether the expression reads the named variable (`oldSelf` makes a transition rule). */
  uses(variable: string): boolean;
  evaluate(variables: Record<string, unknown>): CelOutcome;
}

export class CelCompileError extends Error {}

const env = celEnv({ funcs: strings });
const compiled = new Map<string, CelProgram>();

/** Compiles an expression (cached by its text); throws CelCompileError when it does not parse. */
export function compileCel(expression: string): CelProgram {
  const cached = compiled.get(expression);
  if (cached) return cached;
  let run: ReturnType<typeof plan>;
  try {
    run = plan(env, parse(expression));
  } catch (error) {
    throw new CelCompileError((error as Error).message);
  }
  const identifiers = new Set(expression.replace(/'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*"/g, "''").match(/[A-Za-z_][A-Za-z0-9_]*/g) ?? []);
  const program: CelProgram = {
    expression,
    uses: (variable) => identifiers.has(variable),
    evaluate(variables) {
      const bindings: Record<string, ReturnType<typeof toCel>> = {};
      for (const [name, value] of Object.entries(variables)) bindings[name] = toCel(value);
      let result: unknown;
      try {
        result = run(bindings as never);
      } catch (error) {
        return { ok: false, error: (error as Error).message };
      }
      if (isCelError(result)) return { ok: false, error: result.message };
      return { ok: true, value: fromCel(result as CelValue) };
    },
  };
  compiled.set(expression, program);
  return program;
}

/** Compiles and evaluates in one call; a parse error is an outcome too. */
export function evaluateCel(expression: string, variables: Record<string, unknown>): CelOutcome {
  let program: CelProgram;
  try {
    program = compileCel(expression);
  } catch (error) {
    return { ok: false, error: `compilation failed: ${(error as Error).message}` };
  }
  return program.evaluate(variables);
}

type CelJson = null | boolean | bigint | number | string | CelJson[] | Map<string, CelJson>;

/** A JSON value as CEL input. */
export function toCel(value: unknown): CelJson {
  if (value === null || value === undefined) return null;
  if (typeof value === 'number') return Number.isInteger(value) ? BigInt(value) : value;
  if (typeof value === 'string' || typeof value === 'boolean' || typeof value === 'bigint') return value;
  if (Array.isArray(value)) return value.map(toCel);
  if (value instanceof Map) return value as Map<string, CelJson>;
  return new Map(Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, toCel(v)]));
}

/** A CEL result as JSON (ints as numbers, maps as objects). */
export function fromCel(value: CelValue): unknown {
  if (typeof value === 'bigint') return Number(value);
  if (isCelUint(value)) return Number(value.value);
  if (isCelList(value)) return [...value].map(fromCel);
  if (isCelMap(value)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of value) out[String(isCelUint(k) ? k.value : k)] = fromCel(v);
    return out;
  }
  return value;
}
