import { parseStrictYaml } from './strict-yaml.ts';

/**
 * The OS image entry of platform-deployment.md ("OS image entry"): one element
 * of `images` in `images.yaml`. Every field is a string; only the first three
 * are required. The rules below are the seed's table made exact; where the
 * seed leaves a bound open, the comments below give the bound and why.
 */
export const REQUIRED_FIELDS = ['OS_NAME', 'CLOUD_USER', 'OS_IMAGE_URL'] as const;
export const OPTIONAL_FIELDS = [
  'MIN_MEMORY',
  'MIN_VCPU',
  'MIN_STORAGE',
  'FIRMWARE_TYPE',
  'MACHINE_TYPE',
  'FEATURES',
  'CLOUD_INIT',
  'BOOT_ORDER',
  'ADDITIONAL_DISKS',
] as const;
/** The seed's fields in its table's order: what the endpoint serves, nothing else. */
export const IMAGE_FIELDS = [...REQUIRED_FIELDS, ...OPTIONAL_FIELDS] as const;

export type ImageField = (typeof IMAGE_FIELDS)[number];
export type OsImage = { [K in (typeof REQUIRED_FIELDS)[number]]: string } & { [K in (typeof OPTIONAL_FIELDS)[number]]?: string };

export const FEATURES = ['acpi', 'apic', 'hyperv', 'smm', 'tpm'] as const;
const FIRMWARE_TYPES = ['bios', 'efi'] as const;
/** Disk image formats the VM runtime imports, and the compressions it unpacks. */
const DISK_EXTENSIONS = ['qcow2', 'img', 'raw', 'vmdk'] as const;
const COMPRESSIONS = ['gz', 'xz', 'bz2', 'zst'] as const;

/**
 * The largest VM the console offers. An entry whose minimum is above it could never be
 * created, so it is refused rather than shown.
 */
export const VM_LIMITS = { vcpu: 128, memoryGib: 1024, storageGib: 16384 } as const;

/** What the form uses when an entry leaves a minimum out. */
export const DEFAULT_MINIMUMS = { vcpu: 1, memoryGib: 1, storageGib: 10 } as const;

const MEMORY = /^(\d{1,7}(?:\.\d{1,3})?)([GM])$/;
const STORAGE = /^(\d{1,7}(?:\.\d{1,3})?)G$/;
const VCPU = /^[1-9]\d{0,5}$/;
const USER = /^[A-Za-z_][A-Za-z0-9._-]{0,31}$/;
const MACHINE = /^[a-z0-9][a-z0-9._-]{0,62}$/;
const NAME_ITEM = /^[a-z][a-z0-9-]{0,31}$/;
const CONTROL = /\p{Cc}/u;

/** A value's problem in words, or undefined when it is good. Rules of single fields only. */
type Rule = (value: string) => string | undefined;

export const FIELD_RULES: Record<ImageField, Rule> = {
  OS_NAME: (v) => {
    if (v.trim() === '') return 'must not be empty: it is the name shown in the dropdown';
    if (v !== v.trim()) return 'must not start or end with spaces';
    if (CONTROL.test(v)) return 'must be one line without control characters';
    if (v.length > 100) return `is ${v.length} characters long; at most 100 fit the dropdown`;
    return undefined;
  },
  CLOUD_USER: (v) =>
    USER.test(v)
      ? undefined
      : `must be a user name (a letter or "_", then letters, digits, ".", "_" or "-", at most 32 characters), got ${show(v)}`,
  OS_IMAGE_URL: imageUrlProblem,
  MIN_MEMORY: (v) => {
    if (/^\d+(\.\d+)?(Gi|Mi)$/.test(v)) return `must use the suffix G or M (read as GiB and MiB), got ${show(v)}`;
    const match = MEMORY.exec(v);
    if (!match) return `must be a quantity with the suffix G or M, like "2G" or "512M", got ${show(v)}`;
    const gib = memoryGib(v) ?? 0;
    if (gib <= 0) return 'must be more than zero';
    if (gib > VM_LIMITS.memoryGib) return `is more than the largest VM's memory (${VM_LIMITS.memoryGib}G)`;
    return undefined;
  },
  MIN_VCPU: (v) => {
    if (!VCPU.test(v)) return `must be a whole number of cores above zero, as a string like "2", got ${show(v)}`;
    if (Number(v) > VM_LIMITS.vcpu) return `is more than the largest VM's ${VM_LIMITS.vcpu} vCPU`;
    return undefined;
  },
  MIN_STORAGE: (v) => {
    if (!STORAGE.test(v)) return `must be a size with the suffix G, like "20G", got ${show(v)}`;
    const gib = Number(v.slice(0, -1));
    if (gib <= 0) return 'must be more than zero';
    if (gib > VM_LIMITS.storageGib) return `is more than the largest VM's disk (${VM_LIMITS.storageGib}G)`;
    return undefined;
  },
  FIRMWARE_TYPE: (v) => (FIRMWARE_TYPES.includes(v as 'bios') ? undefined : `must be "bios" or "efi", got ${show(v)}`),
  MACHINE_TYPE: (v) =>
    MACHINE.test(v) ? undefined : `must be a machine type name like "q35" or "pc-q35-rhel8.6.0" (lower case), got ${show(v)}`,
  FEATURES: (v) =>
    listProblem(v, 'feature', (item) => (FEATURES.includes(item as 'acpi') ? undefined : `must be one of ${FEATURES.join(', ')}`)),
  CLOUD_INIT: cloudInitProblem,
  BOOT_ORDER: (v) =>
    listProblem(v, 'boot device', (item) => (NAME_ITEM.test(item) ? undefined : 'must be a device name like disk or cdrom')),
  ADDITIONAL_DISKS: (v) => (v.trim() === '' ? 'must not be empty' : CONTROL.test(v) ? 'must be one line' : undefined),
};

/** Memory of a MIN_MEMORY value in GiB (M read as MiB), or undefined when it is not one. */
export function memoryGib(value: string): number | undefined {
  const match = MEMORY.exec(value);
  if (!match) return undefined;
  const amount = Number(match[1]);
  return match[2] === 'G' ? amount : amount / 1024;
}

/** The minimums an entry asks of a VM, in the console's whole units, rounded up. */
export function minimumsOf(image: OsImage): { vcpu: number; memoryGib: number; storageGib: number } {
  const memory = image.MIN_MEMORY ? memoryGib(image.MIN_MEMORY) : undefined;
  const storage = image.MIN_STORAGE ? Number(image.MIN_STORAGE.slice(0, -1)) : undefined;
  return {
    vcpu: image.MIN_VCPU ? Number(image.MIN_VCPU) : DEFAULT_MINIMUMS.vcpu,
    memoryGib: memory === undefined ? DEFAULT_MINIMUMS.memoryGib : Math.max(1, Math.ceil(memory)),
    storageGib: storage === undefined ? DEFAULT_MINIMUMS.storageGib : Math.max(1, Math.ceil(storage)),
  };
}

/** FEATURES as a list (trimmed items). */
export function featureList(value: string | undefined): string[] {
  return value === undefined ? [] : value.split(',').map((item) => item.trim());
}

/** Windows 11 needs UEFI firmware and a TPM (the seed's table), recognised by its name. */
export function isWindows11(osName: string): boolean {
  return /\bwindows\s*11\b/i.test(osName);
}

function imageUrlProblem(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return `must be an absolute http:// or https:// URL, got ${show(value)}`;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `must use http or https, not ${url.protocol.slice(0, -1)}`;
  if (url.username || url.password) return 'must not carry credentials: every customer can read this URL';
  if (value.length > 2048) return 'is longer than 2,048 characters';
  const file = decodeURIComponent(url.pathname.split('/').pop() ?? '').toLowerCase();
  const parts = file.split('.');
  let last = parts.pop() ?? '';
  if (COMPRESSIONS.includes(last as 'gz')) last = parts.pop() ?? '';
  if (parts.length > 0 && DISK_EXTENSIONS.includes(last as 'qcow2')) return undefined;
  if (last === 'iso') return 'names an ISO installer; the catalogue takes disk images (qcow2, raw, img or vmdk)';
  return `must name a disk image file: .qcow2, .img, .raw or .vmdk, optionally compressed (.gz, .xz, .bz2, .zst); got ${show(file || url.pathname)}`;
}

/** Comma-separated lists: no empty items, no repeats, each item checked. */
function listProblem(value: string, what: string, item: (name: string) => string | undefined): string | undefined {
  const items = value.split(',').map((entry) => entry.trim());
  if (items.some((entry) => entry === '')) return `must be ${what}s separated by commas, without empty items, got ${show(value)}`;
  for (const entry of items) {
    const problem = item(entry);
    if (problem) return `${what} ${show(entry)} ${problem}`;
  }
  const repeated = items.find((entry, i) => items.indexOf(entry) !== i);
  if (repeated) return `names ${what} ${show(repeated)} twice`;
  return undefined;
}

/**
 * User-data the VM runtime accepts: a `#cloud-config` YAML mapping, a script (`#!`),
 * an include list, a boothook, a part handler, a MIME multipart document, cloudbase-init's `#ps1` and
 * `rem cmd` scripts, or one of those behind a `## template: jinja` line. An empty document is refused by the runtime, so it is refused here.
 */
function cloudInitProblem(value: string): string | undefined {
  if (value.trim() === '') return 'is empty; the VM runtime refuses empty user-data (remove the field instead)';
  const lines = value.replace(/^\uFEFF/, '').split('\n');
  const start = /^##\s*template:\s*jinja\s*$/.test(lines[0]?.trim() ?? '') ? 1 : 0;
  const first = lines[start]?.trimEnd() ?? '';
  // A jinja template is YAML only once rendered (on the VM), so only an untemplated document is parsed.
  if (first === '#cloud-config') return start === 0 ? cloudConfigProblem(lines.slice(1).join('\n'), 2) : undefined;
  if (first.startsWith('#!') || ['#include', '#cloud-boothook', '#part-handler'].includes(first)) return undefined;
  // cloudbase-init, the Windows counterpart, also runs PowerShell and cmd user-data.
  if (/^#ps1(_sysnative|_x86)?$/.test(first) || /^rem cmd$/i.test(first)) return undefined;
  if (/^content-type:\s*multipart\//i.test(first) || /^mime-version:/i.test(first)) return undefined;
  return `must start with "#cloud-config", "#!" (a script), "#include", "#cloud-boothook", "#part-handler", "#ps1" or a MIME header; it starts with ${show(first.slice(0, 40))}`;
}

/** A `#cloud-config` body must be a YAML mapping, parsed as strictly as the catalogue itself. */
function cloudConfigProblem(body: string, firstLine: number): string | undefined {
  const { value, errors } = parseStrictYaml(body);
  if (errors[0]) return `is not valid cloud-config YAML at its line ${errors[0].line + firstLine}: ${errors[0].message}`;
  if (value === null || value === undefined) return undefined;
  if (!(value instanceof Map)) return 'is a #cloud-config document that is not a mapping of keys';
  return undefined;
}

function show(value: string): string {
  return JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value);
}
