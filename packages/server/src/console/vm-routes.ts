import { readFileSync } from 'node:fs';
import formbody from '@fastify/formbody';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply } from 'fastify';
import { Type } from 'typebox';
import { PlatformUnavailableError } from '../platform/platform.ts';
import { fromOwnOrigin } from './csrf.ts';
import { consoleErrorPage, consolePage } from './page.ts';
import type { ConsoleService } from './service.ts';
import { CONSOLE_COOKIE, type ConsoleSession } from './service.ts';
import type { ConsoleVmService, FormErrors, VmRequest } from './vms.ts';

/** The form's script, read once; served as a file, since the console's Content-Security-Policy allows no inline script. */
const CONSOLE_JS = readFileSync(new URL('./assets/console.js', import.meta.url));

const FORM_FIELDS = ['project', 'name', 'os', 'vcpu', 'memory_gib', 'storage_gib'] as const;

export const ConsoleQuery = Type.Object(
  { project: Type.Optional(Type.String({ maxLength: 100 })), created: Type.Optional(Type.String({ maxLength: 100 })) },
  { additionalProperties: false },
);

/** Sends a console page (the console's plugin adds its security headers to every answer). */
function sendPage(reply: FastifyReply, status: number, html: string): FastifyReply {
  return reply.code(status).type('text/html; charset=utf-8').header('cache-control', 'no-store').send(html);
}

/** What the console's routes use of the services the composition root wires. */
export interface ConsoleRouteServices {
  console: ConsoleService;
  vms: ConsoleVmService;
  options: { publicUrl: () => string };
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
    form?: { values: Partial<VmRequest>; errors: FormErrors };
  },
): Promise<FastifyReply> {
  const vms = await platformAnswer(reply, () => services.vms.list(session));
  if (!vms) return reply;
  const project = session.projects.some((p) => p.name === options.project) ? (options.project ?? null) : null;
  const created = vms.some((vm) => vm.name === options.created) ? (options.created ?? null) : null;
  const html = consolePage({ session, vms, project, created, ...(options.form ? { form: options.form } : {}) });
  return sendPage(reply, options.status ?? 200, html);
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
  // Forms post as application/x-www-form-urlencoded; only the console's routes accept it.
  await app.register(formbody, { bodyLimit: 16 * 1024 });

  app.get('/console/assets/console.js', async (_request, reply) =>
    reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=300').send(CONSOLE_JS),
  );

  app.post('/console/vms', { schema: { hide: true } }, async (request, reply) => {
    if (!fromOwnOrigin(request.headers, services.options.publicUrl())) {
      return sendPage(reply, 403, consoleErrorPage('Request refused', 'This form can only be sent from the console itself.'));
    }
    const session = await services.console.session(request.cookies[CONSOLE_COOKIE]);
    if (!session) return sendPage(reply, 401, consoleErrorPage('Not signed in', 'Open a console login link to sign in.'));
    const body = (request.body ?? {}) as Record<string, unknown>;
    if (!services.console.csrfMatches(session, body.csrf)) {
      return sendPage(
        reply,
        403,
        consoleErrorPage('Request refused', 'The form has expired or was not sent from the console. Reload the page and try again.'),
      );
    }
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
};
