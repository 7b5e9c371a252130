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
