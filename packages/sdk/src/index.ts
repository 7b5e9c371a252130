export { type ClientOptions, type RequestOptions, TenantryError } from './client.ts';
export { type Customer, List, type ListQuery, type Operation, Tenantry } from './tenantry.ts';
export {
  computeSignature,
  type DedupeStore,
  handleOnce,
  memoryDedupeStore,
  signTestWebhook,
  verifyWebhook,
  WEBHOOK_TOLERANCE_SECONDS,
  type WebhookEvent,
  type WebhookHeaders,
  WebhookVerificationError,
} from './webhooks.ts';
