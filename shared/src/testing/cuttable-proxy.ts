import net from "node:net";
import type { AddressInfo } from "node:net";

/**
 * A TCP hop in the test process in front of a real peer: cut() drops every open connection and refuses new
 * ones (the peer behind a cut network), restore() listens again on the same port. dropOnNextRequest() lets the
 * connections stand until a client next sends something, then drops that connection before the bytes reach the
 * peer: the network failing exactly as a request goes out.
 */
export interface CuttableProxy {
  /** http://127.0.0.1:<port> */
  url: string;
  port: number;
  cut(): Promise<void>;
  restore(): Promise<void>;
  dropOnNextRequest(): void;
  close(): Promise<void>;
}

export async function startCuttableProxy(target: { host: string; port: number }): Promise<CuttableProxy> {
  const sockets = new Set<net.Socket>();
  let dropNext = false;
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host);
    sockets.add(client).add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
    client.on("data", (chunk: Buffer) => {
      if (dropNext) {
        dropNext = false;
        drop();
        return;
      }
      if (!upstream.write(chunk)) {
        client.pause();
        upstream.once("drain", () => client.resume());
      }
    });
    client.on("end", () => upstream.end());
    upstream.pipe(client);
  });
  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => {
        server.off("error", reject);
        resolve();
      });
    });
  const stopListening = () =>
    new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      sockets.clear();
      if (!server.listening) return resolve();
      server.close(() => resolve());
    });
  await listen(0);
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    cut: stopListening,
    restore: () => (server.listening ? Promise.resolve() : listen(port)),
    dropOnNextRequest: () => {
      dropNext = true;
    },
    close: stopListening,
  };
}
