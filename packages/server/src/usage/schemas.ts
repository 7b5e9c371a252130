import { type Static, Type } from 'typebox';
import { PageQuery } from '../infra/pagination/cursor.ts';

const Day = Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$', description: 'A UTC date, YYYY-MM-DD.' });

export const UsageWindowQuery = {
  from: Type.Optional({ ...Day, description: 'First day of the window (UTC, inclusive). Default: 7 days before `to`.' }),
  to: Type.Optional({ ...Day, description: 'Day after the window (UTC, exclusive). Default: tomorrow, so the window ends now.' }),
};

export const UsageListQuery = Type.Object({ ...PageQuery, ...UsageWindowQuery }, { additionalProperties: false });
export const CustomerUsageQuery = Type.Object(UsageWindowQuery, { additionalProperties: false });

/** CONTRACT §4, Capacity, usage: resource-hours of one customer within [from, to). */
export const UsageRecord = Type.Object(
  {
    customer_id: Type.String(),
    deleted_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
      description: 'When the customer was deleted, for a customer deleted within the window (usage until then); null otherwise.',
    }),
    from: Type.String(),
    to: Type.String(),
    vcpu_hours: Type.Number(),
    memory_gib_hours: Type.Number(),
    storage_gib_hours: Type.Number(),
    gpu_hours: Type.Record(Type.String(), Type.Number()),
  },
  { title: 'UsageRecord' },
);
export type UsageRecord = Static<typeof UsageRecord>;
