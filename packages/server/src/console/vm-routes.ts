import { readFileSync } from 'node:fs';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { ApiError } from '../infra/errors/catalogue.ts';
import { PlatformUnavailableError } from '../platform/platform.ts';
import { fromOwnOrigin } from './csrf.ts';
import { consoleErrorPage, consolePage } from './page.ts';
import type { ConsoleService } from './service.ts';
import { CONSOLE_COOKIE, type ConsoleSession } from './service.ts';
import type { ConsoleVmService, FormErrors, VmAction, VmRequest } from './vms.ts';

/** The form's script, read once; served as a file, since the console's Content-Security-Policy allows no inline script. */
const CONSOLE_JS = readFileSync(new URL('./assets/console.js', import.meta.url));

const FORM_FIELDS = ['project', 'name', 'os', 'vcpu', 'memory_gib', 'storage_gib'] as const;

const QUERY_NAME = Type.Optional(Type.String({ maxLength: 100 }));
export const ConsoleQuery = Type.Object(
  { project: QUERY_NAME, created: QUERY_NAME, stopped: QUERY_NAME, started: QUERY_NAME, deleted: QUERY_NAME },
  { additionalProperties: false },
);
/** The query a VM's change redirects to, announcing it once. */
const CHANGE_PARAM: Record<VmAction, 'stopped' | 'started' | 'deleted'> = { stop: 'stopped', start: 'started', delete: 'deleted' };

const VmChangeParams = Type.Object(
  {
    project: Type.String({ maxLength: 100 }),
    name: Type.String({ maxLength: 100 }),
    action: Type.Union([Type.Literal('stop'), Type.Literal('start'), Type.Literal('delete')]),
  },
  { additionalProperties: false },
);

const VmListItem = Type.Object({
  name: Type.String(),
  project: Type.Union([Type.String(), Type.Null()]),
  namespace: Type.Union([Type.String(), Type.Null()]),
  os_name: Type.Union([Type.String(), Type.Null()]),
  vcpu: Type.Union([Type.Integer(), Type.Null()]),
  memory_gib: Type.Union([Type.Integer(), Type.Null()]),
  storage_gib: Type.Union([Type.Integer(), Type.Null()]),
  running: Type.Boolean(),
  created_by: Type.Union([Type.String(), Type.Null()]),
  created_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
});

/** Sends a console page (the console's plugin adds its security headers to every answer). */
function sendPage(reply: FastifyReply, status: number, html: string): FastifyReply {
  return reply.code(status).type('text/html; charset=utf-8').header('cache-control', 'no-store').send(html);
}

/** What the console's routes use of the services the composition root wires. */
export interface ConsoleRouteServices {
  console: ConsoleService;
  /** The sessions the OS image list remembers briefly: a sign-out forgets its own at once. */
  consoleSessions: { forget(sessionId: string): void };
  vms: ConsoleVmService;
  options: { publicUrl: () => string };
}

/**
 * The session of a form's POST (a VM's creation or change, a sign-out), once the request is shown to come
 * from the console itself: its Origin (or Fetch Metadata, or Referer) and the session's own token. Else the
 * refusal page is sent and undefined comes back.
 */
export async function formSession(
  services: ConsoleRouteServices,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<ConsoleSession | undefined> {
  if (!fromOwnOrigin(request.headers, services.options.publicUrl())) {
    sendPage(reply, 403, consoleErrorPage('Request refused', 'This form can only be sent from the console itself.'));
    return undefined;
  }
  const session = await services.console.session(request.cookies[CONSOLE_COOKIE]);
  if (!session) {
    sendPage(reply, 401, consoleErrorPage('Not signed in', 'Open a console login link to sign in.'));
    return undefined;
  }
  if (!services.console.csrfMatches(session, (request.body as Record<string, unknown> | undefined)?.csrf)) {
    sendPage(
      reply,
      403,
      consoleErrorPage('Request refused', 'The form has expired or was not sent from the console. Reload the page and try again.'),
    );
    return undefined;
  }
  return session;
}

/** The console page of a signed-in user, optionally with a posted form shown again with its problems. */
export async function renderConsole(
  services: ConsoleRouteServices,
  reply: FastifyReply,
  session: ConsoleSession,
  options: {
    status?: number;
    project?: string | undefined;
    created?: string | undefined;
    changed?: { name: string; change: VmAction } | undefined;
    alert?: string;
    form?: { values: Partial<VmRequest>; errors: FormErrors };
  },
): Promise<FastifyReply> {
  const read = await platformAnswer(reply, () => Promise.all([services.vms.list(session), services.vms.held(session)]));
  if (!read) return reply;
  const [vms, held] = read;
  const project = session.projects.some((p) => p.name === options.project) ? (options.project ?? null) : null;
  const created = vms.some((vm) => vm.name === options.created) ? (options.created ?? null) : null;
  // A change is announced while the VM is as it says (a deleted VM gone, a stopped one listed stopped).
  const changed = options.changed;
  const shown = changed && vms.find((vm) => vm.name === changed.name && vm.project === project);
  const current = changed?.change === 'delete' ? !shown : changed?.change === 'stop' ? shown && !shown.running : shown?.running;
  const html = consolePage({
    session,
    vms,
    held,
    project,
    created,
    ...(changed && current ? { changed } : {}),
    ...(options.alert ? { alert: options.alert } : {}),
    ...(options.form ? { form: options.form } : {}),
  });
  return sendPage(reply, options.status ?? 200, html);
}

/** Whether a GET comes from a browser's address bar or link (it asks for HTML), not from a script that wants JSON. */
function wantsPage(accept: string | undefined): boolean {
  return accept?.includes('text/html') === true;
}

/**
 * Runs a console read or write that needs the platform; when the platform cannot answer now, the browser
 * gets a console page (503 with Retry-After) rather than the API's JSON envelope, and undefined comes back.
 */
async function platformAnswer<T>(reply: FastifyReply, run: () => Promise<T>): Promise<T | undefined> {
  try {
    return await run();
  } catch (error) {
    if (!(error instanceof PlatformUnavailableError)) throw error;
    reply.header('retry-after', String(error.retryAfterS));
    sendPage(
      reply,
      503,
      consoleErrorPage('The platform is not answering', 'Your VMs cannot be read or created right now. Try again in a minute.'),
    );
    return undefined;
  }
}

/**
 * The console's VM routes: its static files and the form's POST. The POST answers pages, not JSON: a
 * refused request shows why, and a created VM redirects (303) to the console, which lists it.
 */
export const consoleVmRoutes: FastifyPluginAsyncTypebox<{ services: ConsoleRouteServices }> = async (app, { services }) => {
  app.get('/console/assets/console.js', async (_request, reply) =>
    reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=300').send(CONSOLE_JS),
  );

  // A browser that opens the form's address (a reload after a refused form, a bookmark) gets the console;
  // a script gets the VMs as JSON.
  app.get(
    '/console/vms',
    {
      schema: {
        hide: true,
        response: { 200: Type.Object({ status: Type.Literal('success'), data: Type.Array(VmListItem) }) },
      },
    },
    async (request, reply) => {
      const session = await services.console.session(request.cookies[CONSOLE_COOKIE]);
      if (wantsPage(request.headers.accept)) {
        if (!session) return sendPage(reply, 401, consoleErrorPage('Not signed in', 'Open a console login link to sign in.'));
        return reply.header('cache-control', 'no-store').redirect('/console#vms', 303);
      }
      if (!session) throw new ApiError('UNAUTHORIZED', 'This list needs a console session: open a console login link first.');
      const vms = await services.vms.list(session);
      reply.header('cache-control', 'private, no-store');
      return { status: 'success' as const, data: vms.map((vm) => ({ ...vm, created_at: vm.created_at?.toISOString() ?? null })) };
    },
  );

  app.post('/console/vms', { schema: { hide: true } }, async (request, reply) => {
    const session = await formSession(services, request, reply);
    if (!session) return reply;
    const body = (request.body ?? {}) as Record<string, unknown>;
    const values = Object.fromEntries(
      FORM_FIELDS.map((field) => [field, typeof body[field] === 'string' ? (body[field] as string).trim() : '']),
    ) as VmRequest;
    const outcome = await platformAnswer(reply, () => services.vms.create(session, values));
    if (!outcome) return reply;
    if ('errors' in outcome) {
      const status = outcome.errors.form ? 409 : 400;
      return renderConsole(services, reply, session, { status, form: { values, errors: outcome.errors } });
    }
    const query = new URLSearchParams({ project: values.project, created: outcome.vm.name });
    return reply.header('cache-control', 'no-store').redirect(`/console?${query.toString()}#vms`, 303);
  });

  // A VM's buttons: stop, start, delete. Done: back to the console, which says so; refused: the console with why.
  app.post('/console/vms/:project/:name/:action', { schema: { hide: true, params: VmChangeParams } }, async (request, reply) => {
    const session = await formSession(services, request, reply);
    if (!session) return reply;
    const { project, name, action } = request.params;
    const outcome = await platformAnswer(reply, () => services.vms.change(session, project, name, action));
    if (!outcome) return reply;
    if (outcome.state === 'refused') return renderConsole(services, reply, session, { status: outcome.status, alert: outcome.message });
    const query = new URLSearchParams({ project, [CHANGE_PARAM[action]]: name });
    return reply.header('cache-control', 'no-store').redirect(`/console?${query.toString()}#vms`, 303);
  });
};
