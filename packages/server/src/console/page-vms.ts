import { DEFAULT_MINIMUMS, VM_LIMITS } from '../images/fields.ts';
import { badge, escapeHtml } from './page-html.ts';
import type { ConsolePageView } from './page-view.ts';
import type { FormField, VmView } from './vms.ts';

/** DNS_LABEL (platform/names.ts) for the `pattern` attribute, which browsers compile with the `v` flag. */
const NAME_PATTERN = '[a-z0-9]([a-z0-9\\-]{0,38}[a-z0-9])?';

/** The customer's VMs, newest last, as the platform runs them. */
export function vmTableSection(vms: VmView[]): string {
  const cell = (value: number | null, unit = '') => (value === null ? '<span class="muted">—</span>' : `${value}${unit}`);
  const rows = vms
    .map(
      (vm) =>
        `<tr><td><strong>${escapeHtml(vm.name)}</strong></td><td>${vm.project ? escapeHtml(vm.project) : '<span class="muted">—</span>'}</td>` +
        `<td>${vm.os_name ? escapeHtml(vm.os_name) : '<span class="muted">—</span>'}</td><td class="num">${cell(vm.vcpu)}</td>` +
        `<td class="num">${cell(vm.memory_gib, ' GiB')}</td><td class="num">${cell(vm.storage_gib, ' GiB')}</td>` +
        `<td>${badge(vm.running ? 'running' : 'stopped')}</td></tr>`,
    )
    .join('');
  return `<section class="card" id="vms"><h2>Virtual machines</h2>
<table><thead><tr><th>Name</th><th>Project</th><th>Operating system</th><th class="num">vCPU</th><th class="num">Memory</th><th class="num">Storage</th><th>State</th></tr></thead>
<tbody>${rows || '<tr><td colspan="7" class="muted">No virtual machines yet. Create one below.</td></tr>'}</tbody></table></section>`;
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
        `<option value="${escapeHtml(p.name)}" data-namespace="${escapeHtml(p.namespace)}"${p.name === chosen ? ' selected' : ''}>${escapeHtml(p.name)}</option>`,
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
<div class="actions"><button type="submit">Create VM</button><span class="hint">The image's minimums fill the sizes; you may ask for more.</span></div>
</form></section>`;
}
