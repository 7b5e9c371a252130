import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';

/**
 * A TCP proxy that holds every chunk `delayMs` before passing it on, both ways: the bench's way to put
 * the database farther away than loopback (`BENCH_DB_LATENCY_MS`), where every round trip a request
 * makes is paid in time as on a real network. Chunks keep their order (timers of one delay fire in the
 * order they were set); Node's timers round the delay up to whole milliseconds.
 */
export async function startLatencyProxy(target: { host: string; port: number }, delayMs: number) {
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      sockets.add(from);
      from.on('data', (chunk) => setTimeout(() => to.write(chunk), delayMs));
      from.on('close', () => {
        sockets.delete(from);
        setTimeout(() => to.destroy(), delayMs);
      });
      from.on('error', () => from.destroy());
    }
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as { port: number }).port,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}
