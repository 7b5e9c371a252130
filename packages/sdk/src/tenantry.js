import { HttpClient } from './client.js';
import { OPERATIONS } from './generated/api.js';
import { EventStream } from './stream.js';
/**
 * Every item of a list, page after page, for `for await`. `page()` reads one page when a caller wants
 * the cursor itself.
 */
export class List {
  #fetch;
  constructor(fetchPage) {
    this.#fetch = fetchPage;
  }
  page(cursor) {
    return this.#fetch(cursor);
  }
  async *[Symbol.asyncIterator]() {
    let cursor;
    do {
      const page = await this.#fetch(cursor);
      yield* page.data;
      cursor = page.pagination.next_cursor ?? undefined;
    } while (cursor);
  }
}
/**
 * The official client: `new Tenantry({ apiKey, baseUrl })`, then resources as namespaces. Every method
 * names its operation in the OpenAPI document; its arguments and result are that operation's generated
 * types, and every call handles the token and retries as the spec says (see `HttpClient`).
 */
export class Tenantry {
  #http;
  constructor(options) {
    this.#http = new HttpClient(options);
  }
  /** A raw call, for endpoints this version of the SDK does not wrap yet. */
  request(method, path, options) {
    return this.#http.request(method, path, options);
  }
  #options(id, input, call = {}) {
    const route = OPERATIONS[id];
    const path = route.path.replace(/\{(\w+)\}/g, (_, name) => encodeURIComponent(input.path?.[name] ?? ''));
    const options = {
      ...(input.query ? { query: input.query } : {}),
      ...(input.body !== undefined ? { body: input.body } : {}),
      ...(call.idempotencyKey ? { idempotencyKey: call.idempotencyKey } : {}),
    };
    return [route.method, path, options];
  }
  /** One operation; resolves its `data`. */
  async #call(id, input = {}, call) {
    return (await this.#http.request(...this.#options(id, input, call))).data;
  }
  /** A list operation, as an async iterable over every page. */
  #list(id, input = {}) {
    return new List((cursor) => {
      const [method, path, options] = this.#options(id, { ...input, query: { ...input.query, cursor } });
      return this.#http.request(method, path, options);
    });
  }
  auth = {
    /** The partner, scopes, limits and token behind this client's key. */
    whoami: () => this.#call('whoami'),
  };
  customers = {
    /** Starts a `customer.create` operation: `operations.wait(id, result.operation.id)` follows it. */
    create: (body, options) => this.#call('createCustomer', { body }, options),
    get: (id) => this.#call('getCustomer', { path: { id } }),
    list: (query) => this.#list('listCustomers', { query }),
    /** Scheduled (recoverable for `grace_days`) by default; `{ mode: 'immediate' }` tears down now. */
    delete: (id, query, options) => this.#call('deleteCustomer', { path: { id }, query }, options),
    suspend: (id, body = {}, options) => this.#call('suspendCustomer', { path: { id }, body }, options),
    resume: (id, options) => this.#call('resumeCustomer', { path: { id }, body: {} }, options),
    projects: {
      create: (id, body, options) => this.#call('createProject', { path: { id }, body }, options),
      get: (id, project) => this.#call('getProject', { path: { id, project } }),
      list: (id, query) => this.#list('listProjects', { path: { id }, query }),
      delete: (id, project, options) => this.#call('deleteProject', { path: { id, project } }, options),
    },
    users: {
      create: (id, body, options) => this.#call('createUser', { path: { id }, body }, options),
      get: (id, username) => this.#call('getUser', { path: { id, username } }),
      list: (id, query) => this.#list('listUsers', { path: { id }, query }),
      delete: (id, username, options) => this.#call('deleteUser', { path: { id, username } }, options),
      /** A one-click console login URL for the user (short-lived, single use). */
      consoleLogin: (id, username, options) => this.#call('createConsoleLogin', { path: { id, username } }, options),
    },
    plan: {
      get: (id) => this.#call('getCustomerPlan', { path: { id } }),
      update: (id, planId, options) => this.#call('putCustomerPlan', { path: { id }, body: { plan_id: planId } }, options),
    },
    quota: {
      get: (id) => this.#call('getQuota', { path: { id } }),
      /** Send the `revision` read last: a change made since answers 409 CONFLICT. */
      update: (id, body, options) => this.#call('putQuota', { path: { id }, body }, options),
    },
    usage: (id, query) => this.#call('getCustomerUsage', { path: { id }, query }),
  };
  operations = {
    get: (customerId, operationId) => this.#call('getOperation', { path: { id: customerId, operation_id: operationId } }),
    list: (customerId, query) => this.#list('listOperations', { path: { id: customerId }, query }),
    /** Polls until the operation has finished (succeeded or failed); rejects after `timeoutMs` (default 10 minutes). */
    wait: async (customerId, operationId, options = {}) => {
      const timeoutMs = options.timeoutMs ?? 10 * 60_000;
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const operation = await this.operations.get(customerId, operationId);
        if (operation.finished_at !== null) return operation;
        if (Date.now() > deadline) throw new Error(`operation ${operationId} did not finish within ${timeoutMs} ms`);
        await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 1_000));
      }
    },
  };
  catalog = {
    plans: { list: (query) => this.#list('listPlans', { query }) },
  };
  capacity = {
    get: () => this.#call('getCapacity'),
  };
  usage = {
    list: (query) => this.#list('listUsage', { query }),
  };
  webhook = {
    get: () => this.#call('getWebhook'),
    /** The signing secret comes back once, when this call creates it. */
    update: (body, options) => this.#call('putWebhook', { body }, options),
    delete: (options) => this.#call('deleteWebhook', {}, options),
    /** A new secret; the previous one keeps verifying for a few minutes (pass both to `verifyWebhook`). */
    rotateSecret: (options) => this.#call('rotateWebhookSecret', {}, options),
    /** Sends one `ping` now and answers how the receiver responded. */
    test: (options) => this.#call('testWebhook', {}, options),
    deliveries: { list: (query) => this.#list('listWebhookDeliveries', { query }) },
  };
  events = {
    list: (query) => this.#list('listEvents', { query }),
    /**
     * Every new event of this key's mode as it happens (`GET /events/stream`), across reconnects:
     * `for await (const event of tenantry.events.stream({ signal }))`. Pass `lastEventId` to continue
     * after an event you already handled.
     */
    stream: (options) => new EventStream(this.#http, options),
  };
}
