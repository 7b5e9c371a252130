import type { ErrorObject } from 'ajv';
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifyInstance, FastifySchemaValidationError } from 'fastify';
import type { FieldProblem } from '../errors/catalogue.ts';

// ajv-formats is CommonJS; its default export arrives wrapped under ESM.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

/**
 * Two validators: bodies are JSON and keep their types exactly (a "5" is not
 * an integer), while query strings and path parameters arrive as text and are
 * coerced. Neither strips unknown fields: an unknown field is an error the
 * partner should hear about, never silently dropped.
 */
export function installValidators(app: FastifyInstance): void {
  const base = { allErrors: true, removeAdditional: false, useDefaults: true, strict: false } as const;
  const bodyAjv = addFormats(new Ajv({ ...base, coerceTypes: false }));
  const textAjv = addFormats(new Ajv({ ...base, coerceTypes: 'array' }));
  app.setValidatorCompiler(({ schema, httpPart }) =>
    (httpPart === 'body' ? bodyAjv : textAjv).compile(schema as object),
  );
}

const PART: Record<string, FieldProblem['in']> = {
  body: 'body',
  querystring: 'query',
  params: 'path',
  headers: 'header',
};

/** Turns ajv's findings into the `details.errors` a person can act on. */
export function toFieldProblems(
  errors: readonly (FastifySchemaValidationError | ErrorObject)[],
  context: string | undefined,
): FieldProblem[] {
  const where = PART[context ?? 'body'] ?? 'body';
  return errors.map((error) => {
    const base = pointerToPath(error.instancePath ?? '');
    const params = (error.params ?? {}) as Record<string, unknown>;
    if (error.keyword === 'required') {
      return { in: where, field: join(base, String(params.missingProperty)), message: 'is required' };
    }
    if (error.keyword === 'additionalProperties') {
      return { in: where, field: join(base, String(params.additionalProperty)), message: 'is not a known field' };
    }
    if (error.keyword === 'enum' && Array.isArray(params.allowedValues)) {
      return { in: where, field: base, message: `must be one of: ${params.allowedValues.join(', ')}` };
    }
    return { in: where, field: base, message: error.message ?? 'is invalid' };
  });
}

function pointerToPath(pointer: string): string {
  return pointer
    .split('/')
    .slice(1)
    .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
    .join('.');
}

const join = (base: string, field: string): string => (base ? `${base}.${field}` : field);
