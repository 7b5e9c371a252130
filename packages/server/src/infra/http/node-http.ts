import { createRequire } from 'node:module';

/**
 * Node's `node:http`, loaded through CommonJS. Import it from here, not with `import … from 'node:http'`
 * (`import type` is fine: it is erased).
 *
 * The first ECMAScript import of a built-in module makes Node build a facade of it that reads every
 * export once. `node:http` exports `WebSocket`, `CloseEvent` and `MessageEvent` as lazy getters, and
 * reading them loads Node's bundled undici with tls, http2, zlib and assert: 14 MB resident in every
 * process that never opens a WebSocket (nodejs/node#59686 reports the same facade's start-up cost).
 * `require` returns the module object itself and leaves those getters unread.
 */
export const http: typeof import('node:http') = createRequire(import.meta.url)('node:http');
