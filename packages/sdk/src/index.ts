export { type ClientOptions, type RequestOptions, TenantryError } from './client.ts';
/** Every schema of the OpenAPI document as a type (Customer, Project, Quota, the event bodies, ...). */
export type * from './generated/api.ts';
export { EventStream, type EventStreamOptions } from './stream.ts';
export {
  type CallOptions,
  List,
  type OperationId,
  type Page,
  type Query,
  type RequestBody,
  type ResponseData,
  Tenantry,
} from './tenantry.ts';
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
