/**
 * Test helpers for the double's own suites: a raw HTTPS request as one of its users (for headers the
 * generated client does not send or show, such as several Impersonate-Group or the Warning header), and the
 * Status of a refused client call.
 */
import assert from 'node:assert/strict';
import { request as httpsRequest } from 'node:https';
import { ApiException } from '@kubernetes/client-node';
import type { KubeApi } from './index.ts';

export interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Record<string, unknown>;
}

/** One request to the double as `user`, with extra headers (a header given as a list is sent once per value). */
export async function raw(
  kube: KubeApi,
  user: string,
  method: string,
  path: string,
  options: { body?: unknown; headers?: Record<string, string | string[]>; contentType?: string } = {},
): Promise<RawAnswer> {
  const kc = kube.kubeConfig(user);
  const cluster = kc.getCurrentCluster();
  const token = kc.getCurrentUser()?.token ?? '';
  const url = new URL(path, cluster?.server);
  const text = options.body === undefined ? undefined : JSON.stringify(options.body);
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      url,
      {
        method,
        ca: Buffer.from(cluster?.caData ?? '', 'base64').toString(),
        headers: {
          authorization: `Bearer ${token}`,
          ...(text ? { 'content-type': options.contentType ?? 'application/json' } : {}),
          ...options.headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const data = Buffer.concat(chunks).toString();
          let body: Record<string, unknown> = {};
          try {
            body = JSON.parse(data) as Record<string, unknown>;
          } catch {
            body = { text: data };
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
        });
      },
    );
    req.on('error', reject);
    req.end(text);
  });
}

export interface Refusal {
  code: number;
  reason: string;
  message: string;
  details: Record<string, unknown> | undefined;
}

/** The Status a client call was refused with; fails the test when the call succeeds. */
export async function refusal(promise: Promise<unknown>): Promise<Refusal> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof ApiException, `expected an ApiException, got ${String(error)}`);
    const body = (typeof error.body === 'string' ? JSON.parse(error.body) : error.body) as Record<string, unknown>;
    assert.equal(body.kind, 'Status');
    return {
      code: error.code,
      reason: String(body.reason),
      message: String(body.message),
      details: body.details as Record<string, unknown> | undefined,
    };
  }
  assert.fail('the call succeeded');
}
