/** HTML building blocks of the console's pages. */
export const escapeHtml = (value: string) =>
  value.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c);

/**
 * Every console page: no inline script or style (the pages are served under a Content-Security-Policy
 * that allows only the console's own files), the stylesheet and, where a page needs it, the script.
 */
export function layout(title: string, body: string, options: { script?: boolean } = {}): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/console/assets/console.css">
${options.script ? '<script src="/console/assets/console.js" defer></script>\n' : ''}</head><body>${body}</body></html>`;
}

export function badge(state: string): string {
  const tone = ['ready', 'active', 'running'].includes(state)
    ? 'ok'
    : ['failed', 'deleting', 'suspended', 'stopped'].includes(state)
      ? 'bad'
      : 'wait';
  return `<span class="badge ${tone}">${escapeHtml(state.replace('_', ' '))}</span>`;
}

/**
 * Headers of every console page: a Content-Security-Policy allowing only the console's own script,
 * styles and API (no inline code, no framing), no MIME sniffing, and same-origin referrers.
 */
export const CONSOLE_PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'same-origin',
  'cache-control': 'no-store',
} as const;
