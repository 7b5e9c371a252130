import { inTransaction } from '../infra/db/transactions.ts';
import { observedCall, type PlatformCallMetrics } from './observed.ts';
import type { Platform, PlatformContext } from './platform.ts';

/** A platform call made while the caller holds a database transaction: a bug, refused loudly. */
export class PlatformCallInTransactionError extends Error {
  override name = 'PlatformCallInTransactionError';

  constructor(method: string) {
    super(`Platform.${method} was called with a database transaction open: call the platform before or after the transaction`);
  }
}

type Method = Exclude<keyof Platform, 'name' | 'provisionCustomer'>;
const METHODS: Method[] = [
  'ensureOrganization',
  'deleteOrganization',
  'reserveAddressRange',
  'ensureProject',
  'deleteProject',
  'ensureUser',
  'deleteUser',
  'applyQuota',
  'listWorkloads',
  'stopWorkloads',
  'startWorkloads',
  'createVm',
  'stopVm',
  'startVm',
  'deleteVm',
  'heldResources',
  'gpuUsage',
  'usage',
  'prepareConsoleLogin',
];

/**
 * The platform provisioning sees: test mode always runs on the sandbox (CONTRACT §5), live mode on
 * the configured driver (TENANTRY_PLATFORM). Every call is checked against the transaction rule
 * first (no platform call while a database transaction is open), in production as in tests, so a
 * violation can never hide behind a fast driver. Every call is counted and timed by driver, call and
 * result (`metrics`), and traced when traces are on.
 */
export function platformRouter(drivers: { live: Platform; test: Platform }, metrics?: PlatformCallMetrics): Platform {
  const route = (ctx: PlatformContext) => (ctx.mode === 'test' ? drivers.test : drivers.live);
  const router = { name: drivers.live.name } as Platform;
  for (const method of METHODS) {
    Object.assign(router, {
      [method]: (ctx: PlatformContext, ...args: unknown[]) => {
        if (inTransaction()) return Promise.reject(new PlatformCallInTransactionError(method));
        const driver = route(ctx);
        const call = driver[method] as (ctx: PlatformContext, ...rest: unknown[]) => Promise<unknown>;
        return observedCall(driver.name, method, ctx, metrics, () => call.call(driver, ctx, ...args));
      },
    });
  }
  // Optional: a driver without it answers "one call at a time" (undefined).
  router.provisionCustomer = (ctx, customer) => {
    if (inTransaction()) return Promise.reject(new PlatformCallInTransactionError('provisionCustomer'));
    const driver = route(ctx);
    const whole = driver.provisionCustomer?.bind(driver);
    return whole ? observedCall(driver.name, 'provisionCustomer', ctx, metrics, () => whole(ctx, customer)) : Promise.resolve(undefined);
  };
  return router;
}
