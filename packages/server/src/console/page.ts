import type { ConsoleSession } from './service.ts';

const escapeHtml = (value: string) =>
  value.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c);

function layout(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<link rel="stylesheet" href="/console/assets/console.css"></head><body>${body}</body></html>`;
}

/** Served as a file: the console's Content-Security-Policy allows no inline style or script. */
export const CONSOLE_CSS = `body{font:15px/1.5 system-ui,sans-serif;max-width:48rem;margin:2rem auto;padding:0 1rem;color:#1d2330}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.4rem .6rem;border-bottom:1px solid #dde}
.muted{color:#667}
`;

/** The console's landing page: who is logged in, for which customer, and its projects. */
export function consolePage({ customer, user, projects }: ConsoleSession): string {
  const rows = projects
    .map(
      (p) =>
        `<tr><td>${escapeHtml(p.name)}</td><td>${escapeHtml(p.state)}</td><td>${escapeHtml(p.namespace)}</td><td>${escapeHtml(p.cidr ?? '')}</td></tr>`,
    )
    .join('');
  const name = [user.first_name, user.last_name].filter(Boolean).join(' ') || user.username;
  return layout(
    `Console: ${customer.display_name ?? customer.id}`,
    `<h1>${escapeHtml(customer.display_name ?? customer.id)}</h1>
<p>Signed in as <strong>${escapeHtml(name)}</strong> <span class="muted">(${escapeHtml(user.username)}, ${escapeHtml(user.email)}, ${escapeHtml(user.role)})</span>
 to customer <strong>${escapeHtml(customer.id)}</strong>.</p>
<h2>Projects</h2>
<table><thead><tr><th>Project</th><th>State</th><th>Namespace</th><th>Address range</th></tr></thead><tbody>${rows || '<tr><td colspan="4" class="muted">No projects.</td></tr>'}</tbody></table>`,
  );
}

export function consoleErrorPage(title: string, message: string): string {
  return layout(title, `<h1>${escapeHtml(title)}</h1><p>${escapeHtml(message)}</p>`);
}
