export { TenantryError } from './client.js';
export { EventStream } from './stream.js';
export { List, Tenantry } from './tenantry.js';
export {
  computeSignature,
  handleOnce,
  memoryDedupeStore,
  signTestWebhook,
  verifyWebhook,
  WEBHOOK_TOLERANCE_SECONDS,
  WebhookVerificationError,
} from './webhooks.js';
