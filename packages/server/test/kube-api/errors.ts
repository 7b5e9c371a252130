/**
 * API errors as the real server reports them: an HTTP status and a metav1.Status body whose `reason` the
 * clients switch on (NotFound, AlreadyExists, Conflict, Invalid, Gone/Expired, ...).
 */
export class KubeApiError extends Error {
  readonly code: number;
  readonly reason: string;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: number, reason: string, message: string, details?: Record<string, unknown>) {
    super(message);
    this.code = code;
    this.reason = reason;
    this.details = details;
  }

  toStatus(): Record<string, unknown> {
    return statusBody(this.code, this.reason, this.message, this.details);
  }
}

export function statusBody(code: number, reason: string, message: string, details?: Record<string, unknown>): Record<string, unknown> {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: code < 400 ? 'Success' : 'Failure',
    message,
    reason,
    ...(details ? { details } : {}),
    code,
  };
}

interface Target {
  group: string;
  plural: string;
  name?: string;
}

function qualified(t: Target): string {
  return t.group === '' ? t.plural : `${t.plural}.${t.group}`;
}

function details(t: Target, kind?: string): Record<string, unknown> {
  return { ...(t.name !== undefined ? { name: t.name } : {}), group: t.group, kind: kind ?? t.plural };
}

export const errors = {
  notFound: (t: Target) => new KubeApiError(404, 'NotFound', `${qualified(t)} "${t.name}" not found`, details(t)),
  alreadyExists: (t: Target) => new KubeApiError(409, 'AlreadyExists', `${qualified(t)} "${t.name}" already exists`, details(t)),
  conflict: (t: Target) =>
    new KubeApiError(
      409,
      'Conflict',
      `Operation cannot be fulfilled on ${qualified(t)} "${t.name}": the object has been modified; please apply your changes to the latest version and try again`,
      details(t),
    ),
  invalid: (kind: string, name: string, field: string, message: string) =>
    new KubeApiError(422, 'Invalid', `${kind} "${name}" is invalid: ${field}: ${message}`, {
      name,
      kind,
      causes: [{ reason: 'FieldValueInvalid', message, field }],
    }),
  badRequest: (message: string) => new KubeApiError(400, 'BadRequest', message),
  gone: (message: string) => new KubeApiError(410, 'Expired', message),
  methodNotAllowed: (message: string) => new KubeApiError(405, 'MethodNotAllowed', message),
  unauthorized: () => new KubeApiError(401, 'Unauthorized', 'Unauthorized'),
  unsupportedMediaType: (contentType: string) =>
    new KubeApiError(
      415,
      'UnsupportedMediaType',
      `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got ${contentType})`,
    ),
};
