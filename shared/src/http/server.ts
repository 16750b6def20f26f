import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Express } from "express";
import type { Logger } from "pino";

export type Closer = () => Promise<unknown> | unknown;

export interface StartServerOptions {
  port: number;
  host?: string;
  logger: Logger;
  /** How long stop() waits for in-flight requests before cutting connections. */
  shutdownGraceMs?: number;
  /** Run in order after the server has closed (db pool, queue consumers, redis...). */
  onClose?: Closer | Closer[];
  /** Keep-alive idle timeout; keep it above the load balancer's idle timeout in production. */
  keepAliveTimeoutMs?: number;
}

export interface RunningServer {
  server: http.Server;
  url: string;
  port: number;
  /** Graceful: stop accepting, let in-flight requests finish (up to the grace), close idle keep-alive sockets, run closers. Idempotent. */
  stop(): Promise<void>;
}

export async function startServer(
  app: Express | http.RequestListener,
  options: StartServerOptions,
): Promise<RunningServer> {
  const { logger, host = "127.0.0.1", shutdownGraceMs = 10_000 } = options;
  const closers =
    options.onClose === undefined ? [] : Array.isArray(options.onClose) ? options.onClose : [options.onClose];
  const server = http.createServer();
  if (options.keepAliveTimeoutMs !== undefined) {
    server.keepAliveTimeout = options.keepAliveTimeoutMs;
    server.headersTimeout = Math.max(server.headersTimeout, options.keepAliveTimeoutMs + 1000);
  }

  let stopping = false;
  const inFlight = new Set<http.ServerResponse>();
  // One listener for every response (not a closure per request).
  function settled(this: http.ServerResponse): void {
    inFlight.delete(this);
    if (stopping) setImmediate(() => server.closeIdleConnections());
  }
  // Registered before the app so the Connection header is set before the app can answer.
  server.on("request", (_req: http.IncomingMessage, res: http.ServerResponse) => {
    inFlight.add(res);
    if (stopping) res.setHeader("Connection", "close");
    res.on("close", settled);
  });
  server.on("request", app as http.RequestListener);

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const url = `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
  logger.info({ url }, "listening");

  let stopPromise: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopPromise ??= (async () => {
      stopping = true;
      logger.info({ inFlight: inFlight.size }, "shutting down: draining in-flight requests");
      for (const res of inFlight) if (!res.headersSent) res.setHeader("Connection", "close");
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      let timer: NodeJS.Timeout | undefined;
      const graceOver = new Promise<"timeout">((resolve) => {
        timer = setTimeout(() => resolve("timeout"), shutdownGraceMs);
      });
      if ((await Promise.race([closed.then(() => "closed" as const), graceOver])) === "timeout") {
        logger.warn({ inFlight: inFlight.size }, "shutdown grace elapsed; closing remaining connections");
        server.closeAllConnections();
        await closed;
      }
      clearTimeout(timer);
      for (const close of closers) {
        try {
          await close();
        } catch (err) {
          logger.error({ err }, "error while closing a dependency");
        }
      }
      logger.info("stopped");
    })();
    return stopPromise;
  };

  return { server, url, port, stop };
}

/** main.ts helper: on SIGTERM/SIGINT drain and exit 0 (1 if stopping failed). */
export function stopOnSignals(
  running: Pick<RunningServer, "stop">,
  logger: Logger,
  signals: NodeJS.Signals[] = ["SIGTERM", "SIGINT"],
): void {
  for (const signal of signals) {
    process.once(signal, () => {
      logger.info({ signal }, "signal received");
      running.stop().then(
        () => process.exit(0),
        (err: unknown) => {
          logger.error({ err }, "shutdown failed");
          process.exit(1);
        },
      );
    });
  }
}
