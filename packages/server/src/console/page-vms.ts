import { DEFAULT_MINIMUMS, VM_LIMITS } from '../images/fields.ts';
import { badge, escapeHtml } from './page-html.ts';
import type { ConsolePageView } from './page-view.ts';
import type { FormField, VmAction, VmView } from './vms.ts';

/** DNS_LABEL (platform/names.ts) for the `pattern` attribute, which browsers compile with the `v` flag. */
const NAME_PATTERN = '[a-z0-9]([a-z0-9\\-]{0,38}[a-z0-9])?';

const UNITS = { vcpu: 'vCPU', memory_gib: 'GiB of memory', storage_gib: 'GiB of storage' } as const;
const RESOURCES = ['vcpu', 'memory_gib', 'storage_gib'] as const;

/** The customer's VMs, newest last, as the platform runs them, each with its buttons. */
export function vmTableSection(view: ConsolePageView): string {
  const cell = (value: number | null, unit = '') => (value === null ? '<span class="muted">—</span>' : `${value}${unit}`);
  const rows = view.vms
    .map(
      (vm) =>
        `<tr><td><strong>${escapeHtml(vm.name)}</strong></td><td>${vm.project ? escapeHtml(vm.project) : '<span class="muted">—</span>'}</td>` +
        `<td>${vm.os_name ? escapeHtml(vm.os_name) : '<span class="muted">—</span>'}</td><td class="num">${cell(vm.vcpu)}</td>` +
        `<td class="num">${cell(vm.memory_gib, ' GiB')}</td><td class="num">${cell(vm.storage_gib, ' GiB')}</td>` +
        `<td>${badge(vm.running ? 'running' : 'stopped')}</td><td class="row-actions">${vmButtons(view, vm)}</td></tr>`,
    )
    .join('');
  return `<section class="card" id="vms"><h2>Virtual machines</h2>
<table><thead><tr><th>Name</th><th>Project</th><th>Operating system</th><th class="num">vCPU</th><th class="num">Memory</th><th class="num">Storage</th><th>State</th><th><span class="sr-only">Actions</span></th></tr></thead>
<tbody>${rows || '<tr><td colspan="8" class="muted">No virtual machines yet. Create one below.</td></tr>'}</tbody></table></section>`;
}

/** Stop or Start, and Delete (which the script asks to confirm): each a small form with the session's token. */
function vmButtons(view: ConsolePageView, vm: VmView): string {
  const project = view.session.projects.find((p) => p.namespace === vm.namespace);
  if (!project) return '';
  const form = (action: VmAction, label: string, extra = '') =>
    `<form method="post" action="/console/vms/${encodeURIComponent(project.name)}/${encodeURIComponent(vm.name)}/${action}"${extra}>` +
    `<input type="hidden" name="csrf" value="${escapeHtml(view.session.csrfToken)}">` +
    `<button type="submit" class="small${action === 'delete' ? ' danger' : ''}" aria-label="${label} ${escapeHtml(vm.name)}">${label}</button></form>`;
  const confirm = ` data-confirm="${escapeHtml(`Delete ${vm.name} and its disk? This cannot be undone.`)}"`;
  return (vm.running ? form('stop', 'Stop') : form('start', 'Start')) + form('delete', 'Delete', confirm);
}

/** What the customer may hold, what its workloads hold now and what is free: read before the form is filled. */
export function quotaSection(view: ConsolePageView): string {
  const { quota, project_caps: caps } = view.session.quota;
  const used = view.held.customer;
  const rows = RESOURCES.map((key) => {
    const free = Math.max(0, quota[key] - used[key]);
    return `<tr><td>${key === 'vcpu' ? 'vCPU' : key === 'memory_gib' ? 'Memory (GiB)' : 'Storage (GiB)'}</td><td class="num">${used[key]}</td><td class="num">${quota[key]}</td><td class="num${free === 0 ? ' full' : ''}">${free}</td></tr>`;
  }).join('');
  const capLines = view.session.projects
    .filter((p) => caps[p.name] && RESOURCES.some((key) => caps[p.name]?.[key] !== undefined))
    .map((p) => {
      const held = view.held.namespaces[p.namespace] ?? { vcpu: 0, memory_gib: 0, storage_gib: 0 };
      const parts = RESOURCES.filter((key) => caps[p.name]?.[key] !== undefined).map(
        (key) => `${held[key]} of ${caps[p.name]?.[key]} ${UNITS[key]}`,
      );
      return `<li>Project <strong>${escapeHtml(p.name)}</strong> may hold at most its cap: ${parts.join(', ')} used.</li>`;
    })
    .join('');
  return `<section class="card" id="quota"><h2>Quota</h2>
<table><thead><tr><th>Resource</th><th class="num">Used</th><th class="num">Quota</th><th class="num">Free</th></tr></thead>
<tbody>${rows}</tbody></table>
${capLines ? `<ul class="caps">${capLines}</ul>` : ''}<p class="hint">Plan ${escapeHtml(view.session.quota.plan_id)}. A stopped VM keeps its place in the quota; deleting it frees its place.</p></section>`;
}

/** What a new VM in the project may still take: the customer's free quota, within the project's cap. */
function freeIn(view: ConsolePageView, project: { name: string; namespace: string }): Record<(typeof RESOURCES)[number], number> {
  const { quota, project_caps: caps } = view.session.quota;
  const inProject = view.held.namespaces[project.namespace] ?? { vcpu: 0, memory_gib: 0, storage_gib: 0 };
  const free = { vcpu: 0, memory_gib: 0, storage_gib: 0 };
  for (const key of RESOURCES) {
    const cap = caps[project.name]?.[key];
    free[key] = Math.max(
      0,
      Math.min(quota[key] - view.held.customer[key], cap === undefined ? Number.POSITIVE_INFINITY : cap - inProject[key]),
    );
  }
  return free;
}

/**
 * The VM creation form. The OS list is not in the page: the script fills it from
 * `GET /api/create-vm/{namespace}/os-images` for the chosen project, and fills vCPU, memory and storage
 * from the chosen image's minimums, which also become the inputs' `min`. The server checks it all again.
 */
export function vmFormSection(view: ConsolePageView): string {
  const { projects } = view.session;
  const ready = projects.filter((p) => p.state === 'ready');
  const head = '<section class="card" id="create"><h2>Create a virtual machine</h2>';
  if (ready.length === 0) return `${head}<p class="muted">No project is ready yet. Reload this page once one is.</p></section>`;
  const values = view.form?.values ?? {};
  const errors = view.form?.errors ?? {};
  const chosen = values.project ?? view.project ?? ready[0]?.name;
  const options = ready
    .map(
      (p) =>
        `<option value="${escapeHtml(p.name)}" data-namespace="${escapeHtml(p.namespace)}" data-free="${escapeHtml(JSON.stringify(freeIn(view, p)))}"${p.name === chosen ? ' selected' : ''}>${escapeHtml(p.name)}</option>`,
    )
    .join('');
  const error = (field: FormField) =>
    errors[field] ? `<span class="field-error" id="${field}-error">${escapeHtml(errors[field])}</span>` : '';
  const invalid = (field: FormField) => (errors[field] ? ` aria-invalid="true" aria-describedby="${field}-error"` : '');
  const value = (field: keyof typeof values) => (values[field] === undefined ? '' : ` value="${escapeHtml(values[field])}"`);
  const number = (field: 'vcpu' | 'memory_gib' | 'storage_gib', label: string, max: number) =>
    `<label>${label}<input type="number" name="${field}" min="1" max="${max}" step="1" required inputmode="numeric"${value(field)}${invalid(field)}>${error(field)}</label>`;
  return `${head}
${errors.form ? `<p class="alert" role="alert">${escapeHtml(errors.form)}</p>` : ''}
<form id="vm-form" method="post" action="/console/vms" data-selected-os="${escapeHtml(values.os ?? '')}" data-keep-sizes="${view.form ? 'true' : 'false'}" data-defaults="${escapeHtml(JSON.stringify(DEFAULT_MINIMUMS))}">
<input type="hidden" name="csrf" value="${escapeHtml(view.session.csrfToken)}">
<div class="grid">
<label>Project<select name="project" required${invalid('project')}>${options}</select>${error('project')}</label>
<label>Name<input name="name" required maxlength="40" pattern="${escapeHtml(NAME_PATTERN)}" placeholder="web-1" autocomplete="off"${value('name')}${invalid('name')}>${error('name')}</label>
<label class="wide">Operating system<select name="os" required${invalid('os')}><option value="">Loading operating systems…</option></select>
<span class="hint" id="os-status" aria-live="polite"></span>${error('os')}</label>
${number('vcpu', 'vCPU', VM_LIMITS.vcpu)}
${number('memory_gib', 'Memory (GiB)', VM_LIMITS.memoryGib)}
${number('storage_gib', 'Storage (GiB)', VM_LIMITS.storageGib)}
</div>
<dl class="details" id="os-details" hidden></dl>
<p class="hint" id="free-room" aria-live="polite">${freeLine(freeIn(view, ready.find((p) => p.name === chosen) ?? (ready[0] as (typeof ready)[number])))}</p>
<div class="actions"><button type="submit">Create VM</button><span class="hint">The image's minimums fill the sizes; you may ask for more.</span></div>
</form></section>`;
}

/** The form's line on what a new VM may take; the script rewrites it when another project is chosen. */
function freeLine(free: Record<(typeof RESOURCES)[number], number>): string {
  return `Free in your quota for this project: ${free.vcpu} vCPU · ${free.memory_gib} GiB memory · ${free.storage_gib} GiB storage.`;
}
