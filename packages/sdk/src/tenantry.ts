import { type ClientOptions, HttpClient, type RequestOptions } from './client.ts';

/** A list page as the API returns it. */
interface Page<T> {
  data: T[];
  pagination: { next_cursor: string | null };
}

/**
 * Every item of a list, page after page, for `for await`. `page()` reads one page when a caller wants
 * the cursor itself.
 */
export class List<T> implements AsyncIterable<T> {
  readonly #fetch: (cursor: string | undefined) => Promise<Page<T>>;
  constructor(fetchPage: (cursor: string | undefined) => Promise<Page<T>>) {
    this.#fetch = fetchPage;
  }
  page(cursor?: string): Promise<Page<T>> {
    return this.#fetch(cursor);
  }
  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    let cursor: string | undefined;
    do {
      const page = await this.#fetch(cursor);
      yield* page.data;
      cursor = page.pagination.next_cursor ?? undefined;
    } while (cursor);
  }
}

export interface Operation {
  id: string;
  type: string;
  status: 'pending' | 'running' | 'succeeded' | 'failed' | string;
  customer_id: string;
  project: string | null;
  finished_at: string | null;
  error: { code: string; message: string } | null;
  [field: string]: unknown;
}
export type Customer = { id: string; status: string; [field: string]: unknown };
export type ListQuery = { limit?: number; [filter: string]: string | number | undefined };

const enc = encodeURIComponent;

/**
 * The official client: `new Tenantry({ apiKey, baseUrl })`, then resources as namespaces. Every call
 * handles the token and retries as the spec says (see `HttpClient`).
 */
export class Tenantry {
  readonly #http: HttpClient;

  constructor(options: ClientOptions) {
    this.#http = new HttpClient(options);
  }

  /** A raw call, for endpoints this version of the SDK does not wrap yet. */
  request<T>(method: string, path: string, options?: RequestOptions): Promise<T> {
    return this.#http.request<T>(method, path, options);
  }

  #data = async <T>(method: string, path: string, options?: RequestOptions): Promise<T> =>
    (await this.#http.request<{ data: T }>(method, path, options)).data;

  #list = <T>(path: string, query: ListQuery = {}) =>
    new List<T>((cursor) => this.#http.request<Page<T>>('GET', path, { query: { ...query, cursor } }));

  readonly auth = {
    whoami: () => this.#data<Record<string, unknown>>('GET', '/auth/whoami'),
  };

  readonly customers = {
    create: (body: Record<string, unknown>, options?: { idempotencyKey?: string }) =>
      this.#data<{ customer: Customer; operation: Operation }>('POST', '/customers', { body, ...options }),
    get: (id: string) => this.#data<Customer>('GET', `/customers/${enc(id)}`),
    list: (query?: ListQuery) => this.#list<Customer>('/customers', query),
    delete: (id: string, query?: { mode?: 'scheduled' | 'immediate'; grace_days?: number }) =>
      this.#data<{ operation: Operation }>('DELETE', `/customers/${enc(id)}`, { query: query ?? {} }),
    suspend: (id: string, body: Record<string, unknown> = {}) => this.#data<unknown>('POST', `/customers/${enc(id)}/suspend`, { body }),
    resume: (id: string) => this.#data<unknown>('POST', `/customers/${enc(id)}/resume`, { body: {} }),
    projects: {
      create: (customerId: string, body: Record<string, unknown>, options?: { idempotencyKey?: string }) =>
        this.#data<{ project: Record<string, unknown>; operation: Operation }>('POST', `/customers/${enc(customerId)}/projects`, {
          body,
          ...options,
        }),
      get: (customerId: string, name: string) =>
        this.#data<Record<string, unknown>>('GET', `/customers/${enc(customerId)}/projects/${enc(name)}`),
      list: (customerId: string, query?: ListQuery) => this.#list<Record<string, unknown>>(`/customers/${enc(customerId)}/projects`, query),
      delete: (customerId: string, name: string) =>
        this.#data<{ operation: Operation }>('DELETE', `/customers/${enc(customerId)}/projects/${enc(name)}`),
    },
    users: {
      create: (customerId: string, body: Record<string, unknown>, options?: { idempotencyKey?: string }) =>
        this.#data<Record<string, unknown>>('POST', `/customers/${enc(customerId)}/users`, { body, ...options }),
      get: (customerId: string, username: string) =>
        this.#data<Record<string, unknown>>('GET', `/customers/${enc(customerId)}/users/${enc(username)}`),
      list: (customerId: string, query?: ListQuery) => this.#list<Record<string, unknown>>(`/customers/${enc(customerId)}/users`, query),
      delete: (customerId: string, username: string) =>
        this.#data<unknown>('DELETE', `/customers/${enc(customerId)}/users/${enc(username)}`),
      consoleLogin: (customerId: string, username: string) =>
        this.#data<{ url: string; expires_at: string }>('POST', `/customers/${enc(customerId)}/users/${enc(username)}/console-login`),
    },
    plan: {
      get: (customerId: string) => this.#data<Record<string, unknown>>('GET', `/customers/${enc(customerId)}/plan`),
      update: (customerId: string, planId: string) =>
        this.#data<Record<string, unknown>>('PUT', `/customers/${enc(customerId)}/plan`, { body: { plan_id: planId } }),
    },
    usage: (customerId: string, query: { from?: string; to?: string } = {}) =>
      this.#data<Record<string, unknown>>('GET', `/customers/${enc(customerId)}/usage`, { query }),
    quota: {
      get: (customerId: string) => this.#data<Record<string, unknown>>('GET', `/customers/${enc(customerId)}/quota`),
      update: (customerId: string, body: Record<string, unknown>) =>
        this.#data<Record<string, unknown>>('PUT', `/customers/${enc(customerId)}/quota`, { body }),
    },
  };

  readonly operations = {
    get: (customerId: string, operationId: string) =>
      this.#data<Operation>('GET', `/customers/${enc(customerId)}/operations/${enc(operationId)}`),
    list: (customerId: string, query?: ListQuery) => this.#list<Operation>(`/customers/${enc(customerId)}/operations`, query),
    /** Polls until the operation has finished (succeeded or failed); rejects after `timeoutMs`. */
    wait: async (
      customerId: string,
      operationId: string,
      options: { intervalMs?: number; timeoutMs?: number } = {},
    ): Promise<Operation> => {
      const deadline = Date.now() + (options.timeoutMs ?? 10 * 60_000);
      for (;;) {
        const operation = await this.operations.get(customerId, operationId);
        if (operation.finished_at !== null) return operation;
        if (Date.now() > deadline) throw new Error(`operation ${operationId} did not finish within ${options.timeoutMs ?? 600_000} ms`);
        await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 1_000));
      }
    },
  };

  readonly catalog = {
    plans: { list: (query?: ListQuery) => this.#list<Record<string, unknown>>('/catalog/plans', query) },
  };

  readonly capacity = {
    get: () => this.#data<Record<string, unknown>>('GET', '/capacity'),
  };

  readonly usage = {
    list: (query?: ListQuery & { from?: string; to?: string }) => this.#list<Record<string, unknown>>('/usage', query),
  };

  readonly webhook = {
    get: () => this.#data<Record<string, unknown>>('GET', '/webhook'),
    /** The signing secret comes back once, when this call creates it. */
    update: (body: { url?: string; events?: string[]; enabled?: boolean }) =>
      this.#data<Record<string, unknown>>('PUT', '/webhook', { body }),
    delete: () => this.#data<unknown>('DELETE', '/webhook'),
    rotateSecret: () => this.#data<{ signing_secret: string }>('POST', '/webhook/secret'),
    test: () => this.#data<Record<string, unknown>>('POST', '/webhook/test'),
    deliveries: { list: (query?: ListQuery) => this.#list<Record<string, unknown>>('/webhook/deliveries', query) },
  };

  readonly events = {
    list: (query?: ListQuery) => this.#list<Record<string, unknown>>('/events', query),
  };
}
