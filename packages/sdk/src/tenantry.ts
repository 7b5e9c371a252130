import { attachLastResponse, HttpClient, lastResponseOf, type WithLastResponse } from './client.ts';
import { type Api, OPERATIONS, type Operation } from './generated/api.ts';
import type { CallOptions, ClientOptions, ReadOptions, RequestOptions } from './options.ts';
import { EventStream, type EventStreamOptions } from './stream.ts';

type Operations = Api['operations'];
/** Every documented operation, by its `operationId` in the OpenAPI document. */
export type OperationId = keyof Operations;
type Section<K extends OperationId, S extends string> = Operations[K] extends { [key in S]: infer T } ? T : never;
/** What an operation's success response carries in `data`. */
export type ResponseData<K extends OperationId> = Section<K, 'response'> extends { data: infer D } ? D : never;
/** An operation's JSON request body. */
export type RequestBody<K extends OperationId> = Section<K, 'body'>;
/** An operation's query parameters (a list's without `cursor`: iteration follows it). */
export type Query<K extends OperationId> = Omit<Section<K, 'query'>, 'cursor'>;
type Item<K extends OperationId> = ResponseData<K> extends (infer I)[] ? I : never;

/** A list page as the API returns it. */
export interface Page<T> {
  data: T[];
  pagination: { next_cursor: string | null };
}

/**
 * Every item of a list, page after page, for `for await`. `page()` reads one page when a caller wants
 * the cursor itself.
 */
export class List<T> implements AsyncIterable<T> {
  readonly #fetch: (cursor: string | undefined) => Promise<WithLastResponse<Page<T>>>;
  constructor(fetchPage: (cursor: string | undefined) => Promise<WithLastResponse<Page<T>>>) {
    this.#fetch = fetchPage;
  }
  /** One page, with the `lastResponse` that carried it. */
  page(cursor?: string): Promise<WithLastResponse<Page<T>>> {
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

interface Input {
  path?: Record<string, string>;
  query?: object;
  body?: unknown;
}

/**
 * The official client: `new Tenantry({ apiKey, baseUrl })`, then resources as namespaces. Every method
 * names its operation in the OpenAPI document; its arguments and result are that operation's generated
 * types, and every call handles the token and retries as the spec says (see `HttpClient`).
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

  #options(id: OperationId, input: Input, call: CallOptions = {}): [string, string, RequestOptions] {
    const route = OPERATIONS[id];
    const path = route.path.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(input.path?.[name] ?? ''));
    const options: RequestOptions = {
      ...(input.query ? { query: input.query as RequestOptions['query'] } : {}),
      ...(input.body !== undefined ? { body: input.body } : {}),
      ...(call.idempotencyKey ? { idempotencyKey: call.idempotencyKey } : {}),
      ...(call.timeout !== undefined ? { timeout: call.timeout } : {}),
      ...(call.signal ? { signal: call.signal } : {}),
    };
    return [route.method, path, options];
  }

  /** One operation; resolves its `data`, with the `lastResponse` that carried it. */
  async #call<K extends OperationId>(id: K, input: Input = {}, call?: CallOptions): Promise<WithLastResponse<ResponseData<K>>> {
    const envelope = await this.#http.request<{ data: ResponseData<K> }>(...this.#options(id, input, call));
    return attachLastResponse(envelope.data, lastResponseOf(envelope)) as WithLastResponse<ResponseData<K>>;
  }

  /** A list operation, as an async iterable over every page; `call` applies to each page's request. */
  #list<K extends OperationId>(id: K, input: Input = {}, call?: ReadOptions): List<Item<K>> {
    return new List<Item<K>>((cursor) => {
      const [method, path, options] = this.#options(id, { ...input, query: { ...input.query, cursor } }, call);
      return this.#http.request<WithLastResponse<Page<Item<K>>>>(method, path, options);
    });
  }

  readonly auth = {
    /** The partner, scopes, limits and token behind this client's key. */
    whoami: (options?: ReadOptions) => this.#call('whoami', {}, options),
  };

  readonly customers = {
    /** Starts a `customer.create` operation: `operations.wait(id, result.operation.id)` follows it. */
    create: (body: RequestBody<'createCustomer'>, options?: CallOptions) => this.#call('createCustomer', { body }, options),
    get: (id: string, options?: ReadOptions) => this.#call('getCustomer', { path: { id } }, options),
    list: (query?: Query<'listCustomers'>, options?: ReadOptions) => this.#list('listCustomers', { query }, options),
    /** Scheduled (recoverable for `grace_days`) by default; `{ mode: 'immediate' }` tears down now. */
    delete: (id: string, query?: Query<'deleteCustomer'>, options?: CallOptions) =>
      this.#call('deleteCustomer', { path: { id }, query }, options),
    suspend: (id: string, body: RequestBody<'suspendCustomer'> = {}, options?: CallOptions) =>
      this.#call('suspendCustomer', { path: { id }, body }, options),
    resume: (id: string, options?: CallOptions) => this.#call('resumeCustomer', { path: { id }, body: {} }, options),
    projects: {
      create: (id: string, body: RequestBody<'createProject'>, options?: CallOptions) =>
        this.#call('createProject', { path: { id }, body }, options),
      get: (id: string, project: string, options?: ReadOptions) => this.#call('getProject', { path: { id, project } }, options),
      list: (id: string, query?: Query<'listProjects'>, options?: ReadOptions) =>
        this.#list('listProjects', { path: { id }, query }, options),
      delete: (id: string, project: string, options?: CallOptions) => this.#call('deleteProject', { path: { id, project } }, options),
    },
    users: {
      create: (id: string, body: RequestBody<'createUser'>, options?: CallOptions) =>
        this.#call('createUser', { path: { id }, body }, options),
      get: (id: string, username: string, options?: ReadOptions) => this.#call('getUser', { path: { id, username } }, options),
      list: (id: string, query?: Query<'listUsers'>, options?: ReadOptions) => this.#list('listUsers', { path: { id }, query }, options),
      delete: (id: string, username: string, options?: CallOptions) => this.#call('deleteUser', { path: { id, username } }, options),
      /** A one-click console login URL for the user (short-lived, single use). */
      consoleLogin: (id: string, username: string, options?: CallOptions) =>
        this.#call('createConsoleLogin', { path: { id, username } }, options),
    },
    plan: {
      get: (id: string, options?: ReadOptions) => this.#call('getCustomerPlan', { path: { id } }, options),
      update: (id: string, planId: string, options?: CallOptions) =>
        this.#call('putCustomerPlan', { path: { id }, body: { plan_id: planId } }, options),
    },
    quota: {
      get: (id: string, options?: ReadOptions) => this.#call('getQuota', { path: { id } }, options),
      /** Send the `revision` read last: a change made since answers 409 CONFLICT. */
      update: (id: string, body: RequestBody<'putQuota'>, options?: CallOptions) => this.#call('putQuota', { path: { id }, body }, options),
    },
    usage: (id: string, query?: Query<'getCustomerUsage'>, options?: ReadOptions) =>
      this.#call('getCustomerUsage', { path: { id }, query }, options),
  };

  readonly operations = {
    get: (customerId: string, operationId: string, options?: ReadOptions) =>
      this.#call('getOperation', { path: { id: customerId, operation_id: operationId } }, options),
    list: (customerId: string, query?: Query<'listOperations'>, options?: ReadOptions) =>
      this.#list('listOperations', { path: { id: customerId }, query }, options),
    /**
     * Polls until the operation has finished (succeeded or failed); rejects after `timeoutMs` (default 10
     * minutes) in all. `timeout` bounds each poll's request; `signal` stops the polling.
     */
    wait: async (
      customerId: string,
      operationId: string,
      options: { intervalMs?: number; timeoutMs?: number } & ReadOptions = {},
    ): Promise<WithLastResponse<Operation>> => {
      const { intervalMs = 1_000, timeoutMs = 10 * 60_000, ...call } = options;
      const deadline = this.#http.now() + timeoutMs;
      for (;;) {
        const operation = await this.operations.get(customerId, operationId, call);
        if (operation.finished_at !== null) return operation;
        if (this.#http.now() > deadline) throw new Error(`operation ${operationId} did not finish within ${timeoutMs} ms`);
        await this.#http.pause(intervalMs, call.signal);
      }
    },
  };

  readonly catalog = {
    plans: { list: (query?: Query<'listPlans'>, options?: ReadOptions) => this.#list('listPlans', { query }, options) },
  };

  readonly capacity = {
    get: (options?: ReadOptions) => this.#call('getCapacity', {}, options),
  };

  readonly usage = {
    list: (query?: Query<'listUsage'>, options?: ReadOptions) => this.#list('listUsage', { query }, options),
  };

  readonly webhook = {
    get: (options?: ReadOptions) => this.#call('getWebhook', {}, options),
    /** The signing secret comes back once, when this call creates it. */
    update: (body: RequestBody<'putWebhook'>, options?: CallOptions) => this.#call('putWebhook', { body }, options),
    delete: (options?: CallOptions) => this.#call('deleteWebhook', {}, options),
    /** A new secret; the previous one keeps verifying for a few minutes (pass both to `verifyWebhook`). */
    rotateSecret: (options?: CallOptions) => this.#call('rotateWebhookSecret', {}, options),
    /** Sends one `ping` now and answers how the receiver responded. */
    test: (options?: CallOptions) => this.#call('testWebhook', {}, options),
    deliveries: {
      list: (query?: Query<'listWebhookDeliveries'>, options?: ReadOptions) => this.#list('listWebhookDeliveries', { query }, options),
    },
  };

  readonly events = {
    list: (query?: Query<'listEvents'>, options?: ReadOptions) => this.#list('listEvents', { query }, options),
    /**
     * Every new event of this key's mode as it happens (`GET /events/stream`), across reconnects:
     * `for await (const event of tenantry.events.stream({ signal }))`. Pass `lastEventId` to continue
     * after an event you already handled.
     */
    stream: (options?: EventStreamOptions) => new EventStream(this.#http, options),
  };
}
