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
