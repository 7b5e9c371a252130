import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { http, OPERATOR_API, PARTNER_API } from './client.ts';
import { eventually } from './provisioning.ts';
import { type ServeProcess, spawnServe } from './serve-process.ts';
import { TEST_CA_FILE } from './webhook-receiver.ts';

/** What the client helpers need to call one process. */
export interface Member {
  partnerUrl: string;
  operatorUrl: string;
  operatorToken: string;
}

/**
 * Several `tenantry serve` processes on one PostgreSQL database, as a deployment's replicas are: one
 * secret key, one operator token. Requests go to one member by index or to the next in turn, as a
 * load balancer spreads them. A member can be killed (`kill -9`) and started again on the same
 * database; its addresses change then, so callers ask the group for them at each request.
 */
export class ServiceGroup {
  readonly operatorToken = randomBytes(24).toString('hex');
  readonly #env: Record<string, string>;
  readonly #processes: (ServeProcess | undefined)[];
  #turn = 0;

  private constructor(env: Record<string, string>, size: number) {
    this.#env = env;
    this.#processes = Array.from({ length: size }, () => undefined);
  }

  /** `size` processes on the database `databaseUrl`, with the sandbox platform and the test webhook CA. */
  static async start(databaseUrl: string, size = 3, env: Record<string, string> = {}): Promise<ServiceGroup> {
    const group = new ServiceGroup(
      {
        TENANTRY_DATABASE_URL: databaseUrl,
        TENANTRY_SANDBOX_DELAY_MS: '0',
        TENANTRY_WEBHOOK_CA_FILE: TEST_CA_FILE,
        ...env,
      },
      size,
    );
    await Promise.all(group.#processes.map((_, i) => group.startMember(i)));
    return group;
  }

  get size(): number {
    return this.#processes.length;
  }

  /** The member `i`'s addresses; it must be running. */
  member(i: number): Member {
    const process = this.#processes[i];
    assert.ok(process, `member ${i} is running`);
    return { partnerUrl: process.partnerUrl, operatorUrl: process.operatorUrl, operatorToken: this.operatorToken };
  }

  /** The next running member in turn. */
  next(): Member {
    for (let tried = 0; tried < this.size; tried++) {
      const i = this.#turn++ % this.size;
      if (this.#processes[i]) return this.member(i);
    }
    throw new Error('no member is running');
  }

  running(i: number): boolean {
    return this.#processes[i] !== undefined;
  }

  async startMember(i: number): Promise<void> {
    assert.equal(this.#processes[i], undefined, `member ${i} is not running`);
    this.#processes[i] = await spawnServe(
      {
        ...this.#env,
        TENANTRY_OPERATOR_TOKEN: this.operatorToken,
        TENANTRY_DATA_DIR: mkdtempSync(join(tmpdir(), 'tenantry-group-')),
      },
      { keepOutput: false },
    );
  }

  /** `kill -9` of member `i`: no shutdown, its leases and connections are simply gone. */
  async kill(i: number): Promise<void> {
    const process = this.#processes[i];
    this.#processes[i] = undefined;
    await process?.stop('SIGKILL');
  }

  /** Whether member `i` is still alive (it has not exited by itself). */
  alive(i: number): boolean {
    const process = this.#processes[i];
    return process !== undefined && process.child.exitCode === null && process.child.signalCode === null;
  }

  /** Stops every member: SIGTERM lets in-flight work finish; SIGKILL does not. Answers the exit codes. */
  async stop(signal: NodeJS.Signals = 'SIGKILL'): Promise<(number | null)[]> {
    const processes = this.#processes.splice(0, this.size, ...this.#processes.map(() => undefined));
    return Promise.all(processes.map((process) => process?.stop(signal) ?? null));
  }
}

/**
 * A partner with one key exchanged for a token through `member`, with no customer limit and generous
 * rates unless `limits` says otherwise, allowed private webhook receivers (the tests' receiver is on loopback).
 */
export async function groupPartner(
  member: Member,
  id: string,
  limits: Record<string, number> = {},
): Promise<{ key: string; token: string }> {
  const operator = (method: string, path: string, body?: unknown) =>
    http<{ data: Record<string, string> }>(member.operatorUrl, method, `${OPERATOR_API}${path}`, { token: member.operatorToken, body });
  const created = await operator('POST', '/partners', {
    id,
    display_name: `Partner ${id}`,
    allow_private_webhooks: true,
    limits: { max_customers: 0, rate_limit_per_minute: 1_000_000, rate_limit_burst: 100_000, max_open_operations: 10_000, ...limits },
  });
  assert.equal(created.status, 201, created.text);
  const key = (await operator('POST', `/partners/${id}/keys`, {})).body.data.key ?? '';
  // Room in its pool for thousands of customers of the default plan.
  const pool = await operator('PUT', `/partners/${id}/capacity`, { pool: { vcpu: 100_000, memory_gib: 400_000, storage_gib: 10_000_000 } });
  assert.equal(pool.status, 200, pool.text);
  // A new partner's key exchanges once the partner is ready on the platform.
  const exchanged = await eventually(
    () => http<{ access_token: string }>(member.partnerUrl, 'POST', `${PARTNER_API}/auth/token`, { body: { api_key: key } }),
    (result) => result.status === 200,
  );
  return { key, token: exchanged.body.access_token };
}
