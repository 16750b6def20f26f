import http from "node:http";
import type { AddressInfo } from "node:net";
import type { ComponentLogger } from "../db/component-logger";
import { labelProcessMetrics, platformMetrics } from "./platform-metrics";

export interface MetricsServerOptions {
  service: string;
  port: number;
  host?: string;
  logger: ComponentLogger;
  /** Longest a scrape waits for the database/SQS-backed gauges before answering with the last values. */
  hookTimeoutMs?: number;
}

export interface MetricsServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

/**
 * Serves GET /metrics (Prometheus text format) on its own port, apart from the API port, so the
 * public load balancer and the gateway never expose it; the chart lets only the monitoring namespace in.
 */
export async function startMetricsServer(options: MetricsServerOptions): Promise<MetricsServer> {
  const { logger, hookTimeoutMs = 2_000 } = options;
  labelProcessMetrics(options.service);
  const { registry, scrapeHooks } = platformMetrics();

  const refreshGauges = async () => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, hookTimeoutMs)));
    const all = Promise.all(
      scrapeHooks.map((hook) =>
        hook().catch((err: unknown) => logger.warn({ err }, "metrics refresh failed; serving last values")),
      ),
    );
    await Promise.race([all, timeout]);
    clearTimeout(timer);
  };

  const server = http.createServer((req, res) => {
    if (req.method !== "GET" || (req.url ?? "").split("?")[0] !== "/metrics") {
      res.writeHead(404, { "Content-Type": "text/plain" }).end("not found\n");
      return;
    }
    refreshGauges()
      .then(() => registry.metrics())
      .then(
        (body) => res.writeHead(200, { "Content-Type": registry.contentType }).end(body),
        (err: unknown) => {
          logger.error({ err }, "metrics scrape failed");
          res.writeHead(500, { "Content-Type": "text/plain" }).end("metrics unavailable\n");
        },
      );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host ?? "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const host = options.host ?? "127.0.0.1";
  const url = `http://${host.includes(":") ? `[${host}]` : host}:${port}/metrics`;
  logger.info({ url }, "metrics listening");
  return {
    url,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
