import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';

/**
 * A TCP proxy on 127.0.0.1 that stands for the one address a cluster's Service gives a database: a
 * test moves it to another server (a promoted standby), and the connections it carried end, as a
 * Service's do when their endpoint goes away.
 */
export interface TcpProxy {
  readonly port: number;
  /** New connections go to `port` from now on; open ones are cut. */
  moveTo(port: number): void;
  close(): Promise<void>;
}

export async function startTcpProxy(targetPort: number): Promise<TcpProxy> {
  let target = targetPort;
  const open = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(target, '127.0.0.1');
    for (const socket of [client, upstream]) {
      open.add(socket);
      socket.on('close', () => open.delete(socket));
      socket.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const cutAll = () => {
    for (const socket of open) socket.destroy();
  };
  return {
    port: (server.address() as { port: number }).port,
    moveTo: (port) => {
      target = port;
      cutAll();
    },
    close: async () => {
      cutAll();
      server.close();
      await once(server, 'close');
    },
  };
}
