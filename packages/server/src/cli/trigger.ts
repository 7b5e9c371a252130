import { randomBytes } from 'node:crypto';
import { type Tenantry, TenantryError } from '../../../sdk/src/index.ts';
import { CliError } from './operator-client.ts';
import { describeFailure, type PartnerFlags, partnerClient } from './partner-client.ts';

/**
 * `tenantry trigger <event>`: makes the sandbox produce a real event of that type, in test mode, through
 * the partner API alone (the calls a partner's own code makes), so `tenantry listen` and a local
 * receiver see exactly what production sends. Each run creates a new test customer `trg-...` (the
 * events of its creation come too) and leaves it there, as a partner's test data.
 */
export interface TriggerFlags extends PartnerFlags {
  json?: boolean;
}

interface Run {
  client: Tenantry;
  customer: string;
  step(what: string): void;
}

const OWNER = (customer: string) => ({ username: 'owner', email: `owner@${customer}.example` });
const WAIT = { intervalMs: 250, timeoutMs: 120_000 };

async function readyCustomer(run: Run): Promise<void> {
  const { client, customer } = run;
  run.step(`POST /customers {"id":"${customer}"}, then wait for its operation`);
  const { operation } = await client.customers.create({ id: customer, owner: OWNER(customer) });
  const done = await client.operations.wait(customer, operation.id, WAIT);
  if (done.status !== 'succeeded')
    throw new CliError(`the test customer ${customer} did not provision: ${done.error?.code ?? done.status}`);
}

async function readyProject(run: Run, project: string): Promise<void> {
  const { client, customer } = run;
  run.step(`POST /customers/${customer}/projects {"name":"${project}"}, then wait for its operation`);
  const { operation } = await client.customers.projects.create(customer, { name: project });
  await client.operations.wait(customer, operation.id, WAIT);
}

async function failNext(run: Run, body: Record<string, string>): Promise<void> {
  run.step(`POST /test-helpers/failures ${JSON.stringify(body)}`);
  await run.client.request('POST', '/test-helpers/failures', { body });
}

/** For each event, the simplest real path to it through the partner API. */
export const TRIGGERS: Record<string, { how: string; run: (run: Run) => Promise<void> }> = {
  'customer.ready': { how: 'creates a test customer', run: readyCustomer },
  'customer.failed': {
    how: 'makes the next creation fail (test helper), then creates a test customer',
    run: async (run) => {
      await failNext(run, { type: 'customer.create', code: 'PROVISIONING_FAILED', customer_id: run.customer });
      run.step(`POST /customers {"id":"${run.customer}"}, then wait for its operation`);
      const { operation } = await run.client.customers.create({ id: run.customer, owner: OWNER(run.customer) });
      await run.client.operations.wait(run.customer, operation.id, WAIT);
    },
  },
  'customer.suspended': {
    how: 'creates a test customer and suspends it',
    run: async (run) => {
      await readyCustomer(run);
      run.step(`POST /customers/${run.customer}/suspend`);
      await run.client.customers.suspend(run.customer);
    },
  },
  'customer.resumed': {
    how: 'creates a test customer, suspends and resumes it',
    run: async (run) => {
      await TRIGGERS['customer.suspended']?.run(run);
      run.step(`POST /customers/${run.customer}/resume`);
      await run.client.customers.resume(run.customer);
    },
  },
  'customer.deletion_scheduled': {
    how: 'creates a test customer and deletes it (scheduled, recoverable)',
    run: async (run) => {
      await readyCustomer(run);
      run.step(`DELETE /customers/${run.customer}`);
      await run.client.customers.delete(run.customer);
    },
  },
  'customer.deleted': {
    how: 'creates a test customer, deletes it immediately and moves the test clock through teardown',
    run: async (run) => {
      await readyCustomer(run);
      run.step(`DELETE /customers/${run.customer}?mode=immediate`);
      const deleted = await run.client.customers.delete(run.customer, { mode: 'immediate' });
      const operationId = deleted.operation_id;
      if (operationId === null) throw new CliError(`the deletion of ${run.customer} started no teardown`);
      // Teardown takes minutes of the partner's test clock: move it rather than wait.
      for (let i = 0; i < 60; i++) {
        // Once teardown has removed the customer, its operations go with it.
        const current = await run.client.operations.get(run.customer, operationId).catch((error: unknown) => {
          if (error instanceof TenantryError && error.code === 'NOT_FOUND') return { finished_at: 'gone' };
          throw error;
        });
        if (current.finished_at !== null) return;
        run.step('POST /test-helpers/clock/advance {"seconds":60}');
        await run.client.request('POST', '/test-helpers/clock/advance', { body: { seconds: 60 } });
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      throw new CliError(`the deletion of ${run.customer} did not finish`);
    },
  },
  'customer.quota_changed': {
    how: 'creates a test customer and writes its quota back unchanged',
    run: async (run) => {
      await readyCustomer(run);
      const current = await run.client.customers.quota.get(run.customer);
      run.step(`PUT /customers/${run.customer}/quota {"revision":${current.revision},...}`);
      await run.client.customers.quota.update(run.customer, {
        revision: current.revision,
        quota: current.quota,
        ...(Object.keys(current.project_caps).length > 0 ? { project_caps: current.project_caps } : {}),
      });
    },
  },
  'customer.plan_changed': {
    how: 'creates a test customer and sets its plan (the one it has)',
    run: async (run) => {
      await readyCustomer(run);
      const plan = await run.client.customers.plan.get(run.customer);
      run.step(`PUT /customers/${run.customer}/plan {"plan_id":"${plan.plan_id}"}`);
      await run.client.customers.plan.update(run.customer, plan.plan_id);
    },
  },
  'project.ready': {
    how: 'creates a test customer and a second project',
    run: async (run) => {
      await readyCustomer(run);
      await readyProject(run, 'extra');
    },
  },
  'project.failed': {
    how: 'creates a test customer, makes the next project creation fail (test helper), then creates a project',
    run: async (run) => {
      await readyCustomer(run);
      await failNext(run, { type: 'project.create', code: 'PROVISIONING_FAILED', customer_id: run.customer, project: 'extra' });
      await readyProject(run, 'extra');
    },
  },
  'project.deleted': {
    how: 'creates a test customer and a second project, then deletes the project',
    run: async (run) => {
      await TRIGGERS['project.ready']?.run(run);
      run.step(`DELETE /customers/${run.customer}/projects/extra`);
      await run.client.customers.projects.delete(run.customer, 'extra');
    },
  },
};

export async function trigger(event: string, flags: TriggerFlags): Promise<void> {
  const recipe = TRIGGERS[event];
  if (!recipe) {
    throw new CliError(
      `cannot trigger "${event}"; these can be triggered: ${Object.keys(TRIGGERS).join(', ')} (ping: POST /webhook/test)`,
      2,
    );
  }
  const { client, baseUrl } = partnerClient(flags);
  const json = flags.json === true;
  try {
    const me = await client.auth.whoami();
    if (me.token.mode !== 'test') {
      throw new CliError('tenantry trigger needs a test key (tnt_test_...): it creates customers, and live ones are real', 2);
    }
    const customer = `trg-${randomBytes(4).toString('hex')}`;
    const steps: string[] = [];
    const run: Run = {
      client,
      customer,
      step: (what) => {
        steps.push(what);
        if (!json) process.stderr.write(`  ${what}\n`);
      },
    };
    if (!json) process.stderr.write(`Triggering ${event}: ${recipe.how} (${customer})\n`);
    await recipe.run(run);
    if (json) process.stdout.write(`${JSON.stringify({ event, customer_id: customer, steps })}\n`);
    else process.stdout.write(`Triggered ${event} for test customer ${customer} of ${me.partner.id}\n`);
  } catch (error) {
    throw describeFailure(error, baseUrl);
  }
}
