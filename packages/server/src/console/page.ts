import { readFileSync } from 'node:fs';
import { badge, escapeHtml, layout } from './page-html.ts';
import type { ConsolePageView } from './page-view.ts';
import { quotaSection, vmFormSection, vmTableSection } from './page-vms.ts';
import type { VmAction } from './vms.ts';

const CHANGED: Record<VmAction, string> = {
  stop: 'was stopped. It keeps its disk and its place in the quota.',
  start: 'was started.',
  delete: 'was deleted with its disk.',
};

/** The console's stylesheet, served as a file: the console's Content-Security-Policy allows no inline style. */
export const CONSOLE_CSS = readFileSync(new URL('./assets/console.css', import.meta.url), 'utf8');

/** The console: the customer, its projects, its VMs and the form that creates one. */
export function consolePage(view: ConsolePageView): string {
  const { customer, user, projects, partner } = view.session;
  const name = [user.first_name, user.last_name].filter(Boolean).join(' ') || user.username;
  const title = customer.display_name ?? customer.id;
  const vmCount = (namespace: string, project: string) =>
    view.vms.filter((vm) => vm.project === project || vm.project === namespace).length;
  const rows = projects
    .map(
      (p) =>
        `<tr><td><strong>${escapeHtml(p.name)}</strong></td><td>${badge(p.state)}</td><td><code>${escapeHtml(p.namespace)}</code></td>` +
        `<td>${escapeHtml(p.cidr ?? '—')}</td><td class="num">${vmCount(p.namespace, p.name)}</td></tr>`,
    )
    .join('');
  const notice = view.created
    ? `<p class="notice" role="status">VM <strong>${escapeHtml(view.created)}</strong> was created and is starting.</p>`
    : view.changed
      ? `<p class="notice" role="status">VM <strong>${escapeHtml(view.changed.name)}</strong> ${CHANGED[view.changed.change]}</p>`
      : '';
  const alert = view.alert ? `<p class="alert" role="alert">${escapeHtml(view.alert)}</p>` : '';
  // The name once: a user without a first or last name is named by their username.
  const details = [...(name === user.username ? [] : [user.username]), user.email, user.role].map(escapeHtml).join(' · ');
  return layout(
    `${title}: Tenantry console`,
    `<header class="bar"><span class="brand">Tenantry console</span>${portalLink(partner)}
<span class="who">Signed in as <strong>${escapeHtml(name)}</strong> <span class="muted">${details}</span>
<form class="sign-out" method="post" action="/console/logout"><input type="hidden" name="csrf" value="${escapeHtml(view.session.csrfToken)}"><button type="submit" class="link">Sign out</button></form></span></header>
<main>
<section class="intro"><h1>${escapeHtml(title)}</h1>
<p class="muted">Customer <strong>${escapeHtml(customer.id)}</strong> · ${badge(customer.status)} · plan ${escapeHtml(view.session.quota.plan_id)}</p></section>
${notice}${alert}
${quotaSection(view)}
<section class="card"><h2>Projects</h2>
<table><thead><tr><th>Project</th><th>State</th><th>Namespace</th><th>Address range</th><th class="num">VMs</th></tr></thead>
<tbody>${rows || '<tr><td colspan="5" class="muted">No projects.</td></tr>'}</tbody></table></section>
${vmTableSection(view)}
${vmFormSection(view)}
</main>`,
    { script: true },
  );
}

/** "Manage in <partner> portal", as Kube-DC's console shows a partner's `portalUrl`; nothing when it has none. */
function portalLink(partner: { display_name: string; portal_url: string | null }): string {
  if (!partner.portal_url) return '';
  return ` <a class="portal" href="${escapeHtml(partner.portal_url)}" rel="noopener noreferrer">Manage in ${escapeHtml(partner.display_name)} portal</a>`;
}

/** After a sign-out: the session is over, and a new login link signs in again. */
export function signedOutPage(): string {
  return consoleErrorPage('Signed out', 'You are signed out of the console. To sign in again, open a new console login link.');
}

export function consoleErrorPage(title: string, message: string): string {
  return layout(
    title,
    `<main class="narrow"><section class="card"><h1>${escapeHtml(title)}</h1><p>${escapeHtml(message)}</p></section></main>`,
  );
}
