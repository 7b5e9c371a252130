export type { LastResponse, WithLastResponse } from './client.ts';
export { TenantryConnectionError, TenantryError, TenantryTimeoutError } from './errors.ts';
/** Every schema of the OpenAPI document as a type (Customer, Project, Quota, the event bodies, ...). */
export type * from './generated/api.ts';
export type { CallOptions, ClientOptions, ReadOptions, RequestOptions } from './options.ts';
export { EventStream, type EventStreamOptions } from './stream.ts';
export { List, type OperationId, type Page, type Query, type RequestBody, type ResponseData, Tenantry } from './tenantry.ts';
export { VERSION } from './version.ts';
export {
  computeSignature,
  type DedupeStore,
  handleOnce,
  memoryDedupeStore,
  signTestWebhook,
  verifyWebhook,
  WEBHOOK_TOLERANCE_SECONDS,
  type WebhookHeaders,
  WebhookVerificationError,
} from './webhooks.ts';
