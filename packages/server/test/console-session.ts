import assert from 'node:assert/strict';
import { partnerApi } from './client.ts';
import type { TestServer } from './harness.ts';

/** A one-click console login URL for a customer's user, minted through the partner API. */
export async function loginUrl(server: TestServer, token: string, customerId: string, username: string): Promise<string> {
  const minted = await partnerApi<{ data: { url: string } }>(server, 'POST', `/customers/${customerId}/users/${username}/console-login`, {
    token,
  });
  assert.equal(minted.status, 201, minted.text);
  return minted.body.data.url;
}

/** Opens a login URL as a browser would; the session cookie (`name=value`) and its Set-Cookie header. */
export async function consoleCookie(server: TestServer, token: string, customerId: string, username: string) {
  const opened = await fetch(await loginUrl(server, token, customerId, username), { redirect: 'manual' });
  assert.equal(opened.status, 303);
  const setCookie = opened.headers.get('set-cookie') ?? '';
  const cookie = setCookie.split(';')[0] ?? '';
  assert.match(cookie, /^tenantry_console=.+/);
  return { cookie, setCookie };
}

/** The form's CSRF token as the console page renders it. */
export function csrfFrom(html: string): string {
  const match = /name="csrf" value="([^"]+)"/.exec(html);
  assert.ok(match?.[1], 'the page carries the form token');
  return match[1];
}
