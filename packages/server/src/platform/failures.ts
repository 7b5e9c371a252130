/**
 * The failure vocabulary of provisioning (partner-api.md, Operation failure codes): what a failed
 * operation's `error.code` can be, and what a platform step may report. Drivers map every platform
 * error onto it; nothing else reaches an operation record.
 */
export type FailureCode =
  | 'PROVISIONING_FAILED'
  | 'PROVISIONING_TIMEOUT'
  | 'NO_ADDRESS_SPACE'
  | 'CUSTOMER_DELETING'
  | 'CUSTOMER_DELETED'
  | 'UPSTREAM_NOT_FOUND'
  | `UPSTREAM_${number}`;

const FIXED = new Set([
  'PROVISIONING_FAILED',
  'PROVISIONING_TIMEOUT',
  'NO_ADDRESS_SPACE',
  'CUSTOMER_DELETING',
  'CUSTOMER_DELETED',
  'UPSTREAM_NOT_FOUND',
]);

export function isFailureCode(code: string): code is FailureCode {
  return FIXED.has(code) || /^UPSTREAM_[1-5]\d\d$/.test(code);
}

/** The message an operation carries when a driver gave none. */
export function failureMessage(code: FailureCode): string {
  const upstream = /^UPSTREAM_(\d{3})$/.exec(code);
  if (upstream) return `The platform refused a provisioning step with HTTP ${upstream[1]}.`;
  switch (code) {
    case 'NO_ADDRESS_SPACE':
      return 'No network address range was left for the project.';
    case 'PROVISIONING_TIMEOUT':
      return 'Provisioning did not finish within 15 minutes.';
    case 'CUSTOMER_DELETING':
      return 'The customer was deleted while provisioning.';
    case 'CUSTOMER_DELETED':
      return 'The customer no longer exists.';
    case 'UPSTREAM_NOT_FOUND':
      return 'A platform object the step depended on disappeared.';
    default:
      return 'A provisioning step failed.';
  }
}

/** A platform's HTTP status as the failure code of a step it refused (a 404 of an object the step needs is UPSTREAM_NOT_FOUND). */
export function upstreamFailure(status: number): FailureCode {
  return status === 404 ? 'UPSTREAM_NOT_FOUND' : (`UPSTREAM_${status}` as FailureCode);
}
