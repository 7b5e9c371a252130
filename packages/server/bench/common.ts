import { join } from 'node:path';
import { openAppDatabase as openDatabase } from '../src/app/database.ts';
import type { ServeProcess } from '../test/serve-process.ts';

/** Shared by the bench scripts: the operator token the spawned servers run with, and API helpers. */
export const OPERATOR_TOKEN = 'bench-operator-token-0123456789';

export async function operator(server: ServeProcess, method: string, path: string, body: unknown): Promise<Record<string, unknown>> {
  const response = await fetch(`${server.operatorUrl}/api/operator/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${OPERATOR_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const parsed = (await response.json()) as { data: Record<string, unknown> };
  if (!response.ok) throw new Error(`${method} ${path}: ${JSON.stringify(parsed)}`);
  return parsed.data;
}

export async function partnerToken(server: ServeProcess, key: string): Promise<string> {
  const response = await fetch(`${server.partnerUrl}/api/public/v1/auth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ api_key: key }),
  });
  return ((await response.json()) as { access_token: string }).access_token;
}

/** The database a spawned server uses, opened from here while that server is stopped (PGlite has one process). */
export function openServerDatabase(env: Record<string, string>) {
  return env.TENANTRY_DATABASE_URL
    ? openDatabase({ kind: 'postgres', url: env.TENANTRY_DATABASE_URL })
    : openDatabase({ kind: 'embedded', dataDir: join(env.TENANTRY_DATA_DIR ?? '', 'db') });
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}
