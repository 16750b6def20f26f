import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import { Router } from "express";
import pino from "pino";
import { createBaseApp, installErrorHandlers } from "../http";
import { metrics, onScrape } from "./platform-metrics";
import { rememberRouteBase } from "./metrics-middleware";
import { startMetricsServer, type MetricsServer } from "./metrics-server";

const logger = pino({ level: "silent" });
let api: Server;
let base: string;
let metricsServer: MetricsServer;

const scrape = async () => {
  const res = await fetch(metricsServer.url);
  expect(res.status).toBe(200);
  return res.text();
};

beforeAll(async () => {
  const app = createBaseApp({ logger });
  const router = Router();
  router.use(rememberRouteBase);
  router.get("/things/:id", (_req, res) => void res.json({ ok: true }));
  router.post("/things/:id/fail", () => {
    throw new Error("boom");
  });
  app.use("/api/v1", router);
  installErrorHandlers(app, { logger });
  api = app.listen(0, "127.0.0.1");
  await new Promise((resolve) => api.once("listening", resolve));
  base = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
  metricsServer = await startMetricsServer({ service: "metrics-test", port: 0, logger });
});

afterAll(async () => {
  await metricsServer.close();
  await new Promise((resolve) => api.close(resolve));
});

describe("the metrics port", () => {
  it("when requests with ids in their paths are answered, then they are counted under the route template, never the raw path", async () => {
    await fetch(`${base}/api/v1/things/acct-123`);
    await fetch(`${base}/api/v1/things/acct-456`);
    await fetch(`${base}/api/v1/things/acct-789/fail`, { method: "POST" });
    await fetch(`${base}/scanner/probe-0001`);
    await fetch(`${base}/healthz`);
    const text = await scrape();
    expect(text).toContain(
      'http_requests_total{method="GET",route="/api/v1/things/:id",status="200",service="metrics-test"} 2',
    );
    expect(text).toContain(
      'http_requests_total{method="POST",route="/api/v1/things/:id/fail",status="500",service="metrics-test"} 1',
    );
    expect(text).toContain('route="unmatched",status="404"');
    expect(text).toMatch(
      /http_request_duration_seconds_count\{[^}]*method="GET",route="\/api\/v1\/things\/:id"\} 2/,
    );
    expect(text).not.toMatch(/acct-|probe-0001|\/healthz/);
  });

  it("when a gauge refresh fails, then the scrape still answers with the other metrics and process metrics", async () => {
    const remove = onScrape(() => Promise.reject(new Error("database down")));
    const removeOk = onScrape(async () => metrics.outboxBacklog.set(7));
    try {
      const text = await scrape();
      expect(text).toContain('cgs_outbox_backlog{service="metrics-test"} 7');
      expect(text).toContain("process_resident_memory_bytes");
    } finally {
      remove();
      removeOk();
    }
  });

  it("when anything but GET /metrics is asked of the metrics port, then it answers 404", async () => {
    const res = await fetch(metricsServer.url.replace("/metrics", "/api/v1/things/1"));
    expect(res.status).toBe(404);
  });
});
