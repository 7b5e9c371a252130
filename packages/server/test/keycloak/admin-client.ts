import assert from 'node:assert/strict';
import { NetworkError } from '@keycloak/keycloak-admin-client';

/** The status and body of a call Keycloak's admin client saw refused; fails the test if it was accepted. */
export async function refusal(call: Promise<unknown>): Promise<{ status: number; body: unknown }> {
  try {
    await call;
  } catch (error) {
    if (error instanceof NetworkError) return { status: error.response.status, body: error.responseData };
    throw error;
  }
  assert.fail('the call was accepted');
}
