import { createServer as createHttpsServer, type Server } from 'node:https';
import { connect, createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import { generate } from 'selfsigned';

/** How a fake control-plane node answers its health probes. */
export type NodeBehaviour =
  /** A cluster API server: `/readyz` without credentials is 401. */
  | 'apiserver'
  /** The edge gateway: TLS only for SNI names it has a listener for; any other handshake is reset. */
  | 'gateway'
  /** Up, but failing: 503 on every path. */
  | 'unavailable';

export interface ProbeSeen {
  path: string;
  host: string | undefined;
  /** The SNI the client sent (false: none). */
  servername: string | false;
}

let certificate: Promise<{ cert: string; key: string }> | undefined;

function pems(): Promise<{ cert: string; key: string }> {
  certificate ??= generate([{ name: 'commonName', value: 'control-plane-test-node' }], { keyType: 'ec', curve: 'P-256' }).then((p) => ({
    cert: p.cert,
    key: p.private,
  }));
  return certificate;
}

/** The SNI host name in a TLS ClientHello, or undefined when there is none (or the bytes are not one). */
export function sniOf(hello: Buffer): string | undefined {
  try {
    if (hello[0] !== 0x16 || hello[5] !== 0x01) return undefined;
    let at = 5 + 4 + 2 + 32; // record header, handshake header, version, random
    at += 1 + (hello[at] ?? 0); // session id
    at += 2 + hello.readUInt16BE(at); // cipher suites
    at += 1 + (hello[at] ?? 0); // compression methods
    const end = at + 2 + hello.readUInt16BE(at);
    at += 2;
    while (at + 4 <= end) {
      const type = hello.readUInt16BE(at);
      const length = hello.readUInt16BE(at + 2);
      if (type === 0) {
        const nameLength = hello.readUInt16BE(at + 7);
        return hello.subarray(at + 9, at + 9 + nameLength).toString('ascii');
      }
      at += 4 + length;
    }
  } catch {
    return undefined;
  }
  return undefined;
}

/**
 * One control-plane node: a real HTTPS server on its own loopback address (127.0.0.2, .3, ...), in front of
 * which a TCP listener reads the ClientHello so that the gateway can reset handshakes by SNI, as a real one
 * does. Stopping it closes the port (connection refused); it can start again on the same address and port.
 */
export class ControlPlaneNode {
  readonly address: string;
  port = 0;
  behaviour: NodeBehaviour;
  /** SNI names the gateway has TLS listeners for. */
  readonly listeners: Set<string>;
  readonly seen: ProbeSeen[] = [];
  connections = 0;
  resets = 0;
  #https: Server | undefined;
  #front: NetServer | undefined;
  readonly #sockets = new Set<Socket>();

  constructor(address: string, behaviour: NodeBehaviour, listeners: string[] = []) {
    this.address = address;
    this.behaviour = behaviour;
    this.listeners = new Set(listeners);
  }

  get running(): boolean {
    return this.#front !== undefined;
  }

  async start(port = 0): Promise<number> {
    const { cert, key } = await pems();
    const https = createHttpsServer({ cert, key }, (request, response) => {
      const servername = (request.socket as Socket & { servername?: string | false }).servername ?? false;
      this.seen.push({ path: request.url ?? '', host: request.headers.host, servername });
      if (this.behaviour === 'unavailable') response.writeHead(503).end('unavailable');
      else if (this.behaviour === 'apiserver')
        response
          .writeHead(request.url === '/readyz' ? 401 : 404, { 'content-type': 'application/json' })
          .end('{"kind":"Status","code":401}');
      else response.writeHead(200, { 'content-type': 'text/html' }).end('<html>console</html>');
    });
    const front = createNetServer((socket) => {
      this.connections += 1;
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
      socket.on('error', () => undefined);
      socket.once('data', (hello: Buffer) => {
        const sni = sniOf(hello);
        if (this.behaviour === 'gateway' && (sni === undefined || !this.listeners.has(sni))) {
          this.resets += 1;
          socket.resetAndDestroy();
          return;
        }
        // Handed on, bytes unchanged, to the HTTPS server behind (a TLS server cannot take over a socket
        // whose first bytes were already read).
        const inner = connect(innerPort, this.address, () => {
          inner.write(hello);
          socket.pipe(inner).pipe(socket);
        });
        inner.on('error', () => socket.destroy());
        socket.on('close', () => inner.destroy());
      });
    });
    await new Promise<void>((resolve) => https.listen(0, this.address, () => resolve()));
    const innerPort = (https.address() as { port: number }).port;
    await new Promise<void>((resolve, reject) => {
      front.once('error', reject);
      front.listen(port, this.address, () => resolve());
    });
    this.#https = https;
    this.#front = front;
    this.port = (front.address() as { port: number }).port;
    return this.port;
  }

  /** Closes the port and every open connection: probes now get connection refused. */
  async stop(): Promise<void> {
    const front = this.#front;
    this.#front = undefined;
    for (const socket of this.#sockets) socket.destroy();
    this.#https?.closeAllConnections();
    this.#https?.close();
    if (front) await new Promise<void>((resolve) => front.close(() => resolve()));
  }
}

/** Three control-plane nodes on 127.0.0.2-4, all on one port (the probe port is one annotation). */
export async function startControlPlane(
  behaviours: [NodeBehaviour, NodeBehaviour, NodeBehaviour],
  listeners: string[] = [],
): Promise<ControlPlaneNode[]> {
  for (let attempt = 0; ; attempt++) {
    const nodes = behaviours.map((b, i) => new ControlPlaneNode(`127.0.0.${i + 2}`, b, listeners));
    try {
      const port = await (nodes[0] as ControlPlaneNode).start();
      for (const node of nodes.slice(1)) await node.start(port);
      return nodes;
    } catch (error) {
      for (const node of nodes) await node.stop();
      if (attempt >= 5) throw error;
    }
  }
}
