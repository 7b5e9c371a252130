/**
 * Capacity arithmetic: a quota, a plan, a pool or an allocation is an amount of vCPU, memory, storage
 * and GPUs per profile. A dimension is named `vcpu`, `memory_gib`, `storage_gib` or `gpus.<profile>`.
 */
export interface Resources {
  vcpu: number;
  memory_gib: number;
  storage_gib: number;
  gpus: Record<string, number>;
}

/** A project cap: any subset of the dimensions. */
export type PartialResources = Partial<Omit<Resources, 'gpus'>> & { gpus?: Record<string, number> };

export const SCALARS = ['vcpu', 'memory_gib', 'storage_gib'] as const;

export const ZERO: Resources = { vcpu: 0, memory_gib: 0, storage_gib: 0, gpus: {} };

/** Every dimension of `r` with its value (GPU profiles at zero included). */
export function dimensions(r: PartialResources): [string, number][] {
  const out: [string, number][] = [];
  for (const key of SCALARS) if (r[key] !== undefined) out.push([key, r[key]]);
  for (const [profile, n] of Object.entries(r.gpus ?? {})) out.push([`gpus.${profile}`, n]);
  return out;
}

export function amountIn(r: Resources, dimension: string): number {
  if (dimension.startsWith('gpus.')) return r.gpus[dimension.slice(5)] ?? 0;
  return r[dimension as (typeof SCALARS)[number]];
}

function combine(a: Resources, b: Resources, sign: 1 | -1): Resources {
  const gpus: Record<string, number> = { ...a.gpus };
  for (const [profile, n] of Object.entries(b.gpus)) gpus[profile] = (gpus[profile] ?? 0) + sign * n;
  for (const [profile, n] of Object.entries(gpus)) if (n === 0) delete gpus[profile];
  return {
    vcpu: a.vcpu + sign * b.vcpu,
    memory_gib: a.memory_gib + sign * b.memory_gib,
    storage_gib: a.storage_gib + sign * b.storage_gib,
    gpus,
  };
}

export const add = (a: Resources, b: Resources): Resources => combine(a, b, 1);
export const subtract = (a: Resources, b: Resources): Resources => combine(a, b, -1);

/** The dimensions named in either amount, scalars first, then GPU profiles by name. */
export function dimensionNames(...amounts: PartialResources[]): string[] {
  const profiles = new Set<string>();
  for (const a of amounts) for (const p of Object.keys(a.gpus ?? {})) profiles.add(p);
  return [...SCALARS, ...[...profiles].sort().map((p) => `gpus.${p}`)];
}

/** A copy without zero GPU entries, so equal amounts compare and print alike. */
export function normalize(r: Resources): Resources {
  return add(ZERO, r);
}
