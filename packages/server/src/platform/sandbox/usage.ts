import type { Selectable } from 'kysely';
import type { PlatformContext, UsageSubject, UsageTotals } from '../platform.ts';
import { latency, type Sandbox, scopeOf } from './state.ts';
import type { SandboxUsageTable } from './tables.ts';

export async function usage(
  s: Sandbox,
  ctx: PlatformContext,
  customers: UsageSubject[],
  from: Date,
  to: Date,
): Promise<Map<string, UsageTotals>> {
  await latency(s, ctx);
  const totals = new Map<string, UsageTotals>(
    customers.map((c) => [c.customerId, { vcpu_hours: 0, memory_gib_hours: 0, storage_gib_hours: 0, gpu_hours: {} }]),
  );
  if (customers.length === 0) return totals;
  // A deleted customer and a later one of the same id share an organization name: each span goes to
  // every subject of its organization, cut to that subject's own life.
  const byOrganization = new Map<string, UsageSubject[]>();
  for (const c of customers) byOrganization.set(c.organization, [...(byOrganization.get(c.organization) ?? []), c]);
  const spans = await s.db
    .selectFrom('sandbox_usage')
    .selectAll()
    .where('platform_scope', '=', scopeOf(ctx))
    .where('organization', 'in', [...byOrganization.keys()])
    .where('started_at', '<', to)
    .where((eb) => eb.or([eb('ended_at', 'is', null), eb('ended_at', '>', from)]))
    .execute();
  for (const span of spans) {
    for (const subject of byOrganization.get(span.organization) ?? []) addSpan(totals, span, subject, from, to, ctx.now);
  }
  return totals;
}

function addSpan(
  totals: Map<string, UsageTotals>,
  span: Selectable<SandboxUsageTable>,
  subject: UsageSubject,
  from: Date,
  to: Date,
  now: Date,
): void {
  const start = Math.max(span.started_at.getTime(), from.getTime(), subject.since.getTime());
  const end = Math.min((span.ended_at ?? now).getTime(), to.getTime(), now.getTime(), subject.until?.getTime() ?? Number.POSITIVE_INFINITY);
  if (end <= start) return;
  const hours = (end - start) / 3_600_000;
  const total = totals.get(subject.customerId);
  if (!total) return;
  total.vcpu_hours += span.vcpu * hours;
  total.memory_gib_hours += span.memory_gib * hours;
  total.storage_gib_hours += span.storage_gib * hours;
  for (const [profile, n] of Object.entries(span.gpus)) total.gpu_hours[profile] = (total.gpu_hours[profile] ?? 0) + n * hours;
}
