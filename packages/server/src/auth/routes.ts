import { parse as parseQueryString } from 'node:querystring';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Static } from 'typebox';
import { validationError } from '../infra/errors/catalogue.ts';
import { success } from '../infra/http/envelope.ts';
import { principalOf } from './authenticate.ts';
import { TokenRequestForm, TokenRequestJson, TokenResponse, Whoami } from './schemas.ts';
import { type AuthService, rateLimitHeaders } from './service.ts';

const WhoamiResponse = success(Whoami, 'Who the token acts for, and what it may do.');

export const authRoutes: FastifyPluginAsyncTypebox<{ auth: AuthService }> = async (app, { auth }) => {
  // The token endpoint alone also accepts the OAuth form encoding; this parser
  // is encapsulated in this plugin, so every other route still refuses it.
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_request, body, done) => {
    // A repeated field stays an array, which the schema then refuses.
    done(null, { ...parseQueryString(String(body)) });
  });

  app.post(
    '/auth/token',
    {
      schema: {
        operationId: 'exchangeToken',
        tags: ['Authentication'],
        summary: 'Exchange an API key for an access token',
        description:
          'The one call without a token. Send the API key as JSON `{"api_key": "..."}`, or as the OAuth form `grant_type=client_credentials&client_secret=<key>`. The answer is not enveloped. Every failure of the key (unknown, malformed, revoked, expired, or sent from an address the key does not allow) answers the same 401 UNAUTHORIZED, on purpose. At most 30 exchanges a minute per key (burst 10): cache the token until about 60 seconds before it expires.',
        body: {
          content: {
            'application/json': { schema: TokenRequestJson },
            'application/x-www-form-urlencoded': { schema: TokenRequestForm },
          },
        },
        response: { 200: { ...TokenResponse, 'x-response-description': 'The access token (not enveloped).' } },
      },
    },
    async (request, reply) => {
      // One schema per content type: JSON carries api_key, the form client_secret.
      const body = request.body as { api_key?: unknown; client_secret?: unknown } | string | undefined;
      const apiKey = typeof body === 'object' && body !== null ? (body.api_key ?? body.client_secret) : undefined;
      if (typeof apiKey !== 'string') {
        // No body, or a content type without a schema (text/plain): nothing validated it.
        throw validationError([
          { in: 'body', field: '', message: 'send JSON {"api_key": "..."} or the form grant_type=client_credentials&client_secret=...' },
        ]);
      }
      const { token, rate } = await auth.exchange(apiKey, request.ip);
      reply.headers(rateLimitHeaders(rate)).header('cache-control', 'no-store');
      return token;
    },
  );

  app.get(
    '/auth/whoami',
    {
      config: { scope: 'any' },
      schema: {
        operationId: 'whoami',
        tags: ['Authentication'],
        summary: 'Describe the partner, scopes, limits and token of the calling token',
        description:
          "The self-test after deploying a key: the partner, the token's scopes and expiry, the limits and the defaults. Any valid token may call it, whatever its scopes.",
        response: { 200: WhoamiResponse },
      },
    },
    // The answer's text, built once per token and partner row. A string with a JSON content type is sent as
    // it is. Returned, not sent: a handler that returns the reply makes Fastify wait on the response's end.
    (request, reply) => {
      const body: unknown = auth.whoamiJson(principalOf(request));
      reply.type('application/json; charset=utf-8');
      return body as Static<typeof WhoamiResponse>;
    },
  );
};
