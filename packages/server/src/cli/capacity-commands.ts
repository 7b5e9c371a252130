import type { Command } from 'commander';
import { flagError, wholeNumber } from './flag-hints.ts';
import { CliError, type FlagHints, operatorClientFromEnv } from './operator-client.ts';
import { column, printRows } from './output.ts';

/** CONTRACT §3: the plan catalogue, which plans a partner may assign, capacity pools and GPU profiles. */
export function registerCapacityCommands(program: Command): void {
  const plans = program.command('plans').description('the plan catalogue');
  plans
    .command('list')
    .description('list the plans')
    .option('--json', 'print JSON')
    .action(async (flags: { json?: boolean }) => {
      const all = await operatorClientFromEnv().request<PlanView[]>('GET', '/plans');
      printRows(flags.json === true, all, PLAN_COLUMNS, all.map(planRow));
    });
  plans
    .command('set <plan-id>')
    .description('create or replace a plan (customers keep their quota until their plan is set again)')
    .requiredOption('--name <display name>', 'display name')
    .requiredOption('--vcpu <n>', 'vCPUs')
    .requiredOption('--memory-gib <n>', 'memory in GiB')
    .requiredOption('--storage-gib <n>', 'storage in GiB')
    .option('--gpu <profile=n>', 'GPUs of a profile (repeat for several)', collect, [])
    .option('--json', 'print JSON')
    .action(
      async (id: string, flags: { name: string; vcpu: string; memoryGib: string; storageGib: string; gpu: string[]; json?: boolean }) => {
        const quota = {
          vcpu: count('--vcpu', flags.vcpu),
          memory_gib: count('--memory-gib', flags.memoryGib),
          storage_gib: count('--storage-gib', flags.storageGib),
          gpus: gpus('--gpu', flags.gpu),
        };
        const plan = await operatorClientFromEnv().request<PlanView>(
          'PUT',
          `/plans/${encodeURIComponent(id)}`,
          { display_name: flags.name, quota },
          { flags: PLAN_FLAGS },
        );
        printRows(flags.json === true, plan, PLAN_COLUMNS, [planRow(plan)]);
      },
    );

  const partners = program.commands.find((c) => c.name() === 'partners');
  if (!partners) throw new Error('register the partner commands first');
  partners
    .command('plans <partner> <plan-id...>')
    .description('set the plans a partner may assign (replaces the list)')
    .option('--json', 'print JSON')
    .action(async (partner: string, ids: string[], flags: { json?: boolean }) => {
      const result = await operatorClientFromEnv().request<Record<string, unknown>>(
        'PUT',
        `/partners/${encodeURIComponent(partner)}/plans`,
        { plans: ids },
      );
      printCapacity(flags.json === true, result);
    });

  const capacity = program.command('capacity').description("a partner's capacity pool and per-customer maximum");
  capacity
    .command('show <partner>')
    .description('show the pool, what is allocated (live and test), the per-customer maximum, plans and GPU profiles')
    .option('--json', 'print JSON')
    .action(async (partner: string, flags: { json?: boolean }) => {
      printCapacity(flags.json === true, await operatorClientFromEnv().request('GET', `/partners/${encodeURIComponent(partner)}/capacity`));
    });
  capacity
    .command('set <partner>')
    .description('change the pool and the per-customer maximum; what is not given keeps its value (a GPU profile at 0 leaves it)')
    .option('--vcpu <n>', 'pool vCPUs')
    .option('--memory-gib <n>', 'pool memory, GiB')
    .option('--storage-gib <n>', 'pool storage, GiB')
    .option('--gpu <profile=n>', 'pool GPUs of a profile (repeat)', collect, [])
    .option('--per-customer-vcpu <n>', 'most vCPUs one customer may hold')
    .option('--per-customer-memory-gib <n>', 'most memory one customer may hold, GiB')
    .option('--per-customer-storage-gib <n>', 'most storage one customer may hold, GiB')
    .option('--per-customer-gpu <profile=n>', 'most GPUs of a profile one customer may hold (repeat)', collect, [])
    .option('--json', 'print JSON')
    .action(async (partner: string, flags: CapacityFlags) => {
      const body = {
        pool: partial(flags.vcpu, flags.memoryGib, flags.storageGib, flags.gpu, ''),
        per_customer_max: partial(
          flags.perCustomerVcpu,
          flags.perCustomerMemoryGib,
          flags.perCustomerStorageGib,
          flags.perCustomerGpu,
          'per-customer-',
        ),
      };
      if (Object.keys(body.pool).length === 0 && Object.keys(body.per_customer_max).length === 0) {
        throw new CliError('nothing to change: pass at least one flag (see tenantry capacity set --help)', 2);
      }
      printCapacity(
        flags.json === true,
        await operatorClientFromEnv().request('PUT', `/partners/${encodeURIComponent(partner)}/capacity`, body, { flags: CAPACITY_FLAGS }),
      );
    });

  program
    .command('gpu-profiles')
    .description('GPU profiles a partner may grant')
    .command('set <partner> <profile...>')
    .description('set the GPU profiles a partner may grant (replaces the list)')
    .option('--json', 'print JSON')
    .action(async (partner: string, profiles: string[], flags: { json?: boolean }) => {
      printCapacity(
        flags.json === true,
        await operatorClientFromEnv().request('PUT', `/partners/${encodeURIComponent(partner)}/gpu-profiles`, { profiles }),
      );
    });
}

const PLAN_FLAGS: FlagHints = {
  display_name: { flag: '--name', example: '"GPU small"' },
  'quota.vcpu': { flag: '--vcpu', example: '16' },
  'quota.memory_gib': { flag: '--memory-gib', example: '64' },
  'quota.storage_gib': { flag: '--storage-gib', example: '500' },
  'quota.gpus': { flag: '--gpu', example: 'a100-40gb=2' },
};

/** `pool.vcpu` is --vcpu, `per_customer_max.vcpu` is --per-customer-vcpu, and so on. */
const CAPACITY_FLAGS: FlagHints = Object.fromEntries(
  (['pool', 'per_customer_max'] as const).flatMap((section) =>
    (
      [
        ['vcpu', 'vcpu', '64'],
        ['memory_gib', 'memory-gib', '256'],
        ['storage_gib', 'storage-gib', '2000'],
        ['gpus', 'gpu', 'a100-40gb=4'],
      ] as const
    ).map(([field, flag, example]) => [`${section}.${field}`, { flag: `--${section === 'pool' ? '' : 'per-customer-'}${flag}`, example }]),
  ),
);

interface CapacityFlags {
  vcpu?: string;
  memoryGib?: string;
  storageGib?: string;
  gpu: string[];
  perCustomerVcpu?: string;
  perCustomerMemoryGib?: string;
  perCustomerStorageGib?: string;
  perCustomerGpu: string[];
  json?: boolean;
}

interface PlanView {
  id: string;
  display_name: string;
  quota: { vcpu: number; memory_gib: number; storage_gib: number; gpus: Record<string, number> };
}

const PLAN_COLUMNS = [
  column('ID', 'id'),
  column('NAME', 'name'),
  column('VCPU', 'vcpu'),
  column('MEMORY GIB', 'memory_gib'),
  column('STORAGE GIB', 'storage_gib'),
  column('GPUS', 'gpus'),
];

const formatGpus = (gpus: Record<string, number>) =>
  Object.entries(gpus)
    .map(([p, n]) => `${p}=${n}`)
    .join(' ') || '-';

function planRow(plan: PlanView): Record<string, unknown> {
  return { id: plan.id, name: plan.display_name, ...plan.quota, gpus: formatGpus(plan.quota.gpus) };
}

/** A readable table of a partner's capacity: one row per dimension. */
function printCapacity(json: boolean, view: Record<string, unknown>): void {
  type R = { vcpu: number; memory_gib: number; storage_gib: number; gpus: Record<string, number> };
  const { pool, per_customer_max: max, allocated } = view as { pool: R; per_customer_max: R; allocated: { live: R; test: R } };
  const profiles = [...new Set([...Object.keys(pool.gpus), ...Object.keys(max.gpus), ...Object.keys(allocated.live.gpus)])].sort();
  const value = (r: R, d: string) => (d.startsWith('gpus.') ? (r.gpus[d.slice(5)] ?? 0) : r[d as 'vcpu']);
  const rows = ['vcpu', 'memory_gib', 'storage_gib', ...profiles.map((p) => `gpus.${p}`)].map((d) => ({
    dimension: d,
    pool: value(pool, d),
    live: value(allocated.live, d),
    test: value(allocated.test, d),
    max: value(max, d),
  }));
  printRows(
    json,
    view,
    [
      column('DIMENSION', 'dimension'),
      column('POOL', 'pool'),
      column('ALLOCATED LIVE', 'live'),
      column('ALLOCATED TEST', 'test'),
      column('PER CUSTOMER', 'max'),
    ],
    rows,
  );
  if (!json) {
    process.stdout.write(
      `plans: ${(view.plans as string[]).join(', ') || '-'}\ngpu profiles: ${(view.gpu_profiles as string[]).join(', ') || '-'}\n`,
    );
  }
}

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

function count(flag: string, value: string): number {
  return wholeNumber({ flag, example: '16' }, value);
}

function gpus(flag: string, values: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const value of values) {
    const match = /^([a-z0-9-]+)=(\d+)$/.exec(value);
    if (!match) throw flagError({ flag, example: 'a100-40gb=2' }, 'must be PROFILE=N', value);
    out[match[1] as string] = Number(match[2]);
  }
  return out;
}

function partial(vcpu: string | undefined, memory: string | undefined, storage: string | undefined, gpuFlags: string[], prefix: string) {
  const out: Record<string, unknown> = {};
  if (vcpu !== undefined) out.vcpu = count(`--${prefix}vcpu`, vcpu);
  if (memory !== undefined) out.memory_gib = count(`--${prefix}memory-gib`, memory);
  if (storage !== undefined) out.storage_gib = count(`--${prefix}storage-gib`, storage);
  if (gpuFlags.length > 0) out.gpus = gpus(`--${prefix}gpu`, gpuFlags);
  return out;
}
