import http from "node:http";
import pino from "pino";
import { createBaseApp, installErrorHandlers } from "./base-app";
import { startServer } from "./server";

const logger = pino({ level: "silent" });

function get(
  url: string,
  agent?: http.Agent,
): Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent }, (res) => {
        let body = "";
        res.on("data", (c: Buffer) => (body += c.toString()));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
      })
      .on("error", reject);
  });
}

describe("startServer / stop", () => {
  it("when stopping with a slow request in flight, then it completes, new connections are refused and closers run after", async () => {
    const events: string[] = [];
    const app = createBaseApp({ logger });
    app.get("/slow", async (_req, res) => {
      res.on("finish", () => events.push("slow-finished"));
      await new Promise((r) => setTimeout(r, 400));
      res.json({ done: true });
    });
    installErrorHandlers(app, { logger });
    const running = await startServer(app, {
      port: 0,
      logger,
      shutdownGraceMs: 5_000,
      onClose: () => {
        events.push("closer");
      },
    });
    const agent = new http.Agent({ keepAlive: true });
    // an idle keep-alive connection must not hold shutdown up
    expect((await get(`${running.url}/healthz`, agent)).status).toBe(200);

    const slow = get(`${running.url}/slow`);
    await new Promise((r) => setTimeout(r, 100));
    const started = Date.now();
    const stopped = running.stop().then(() => events.push("stopped"));
    await new Promise((r) => setTimeout(r, 50));
    await expect(get(`${running.url}/healthz`)).rejects.toMatchObject({ code: "ECONNREFUSED" });

    const slowResult = await slow;
    expect(slowResult.status).toBe(200);
    expect(JSON.parse(slowResult.body)).toEqual({ done: true });
    expect(slowResult.headers.connection).toBe("close");
    await stopped;
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(events).toEqual(["slow-finished", "closer", "stopped"]);
    agent.destroy();
  });

  it("when a request outlives the grace, then stop() cuts it and still finishes", async () => {
    const app = createBaseApp({ logger });
    app.get("/hang", () => undefined);
    const running = await startServer(app, { port: 0, logger, shutdownGraceMs: 200 });
    const hung = get(`${running.url}/hang`).catch((e: NodeJS.ErrnoException) => e.code);
    await new Promise((r) => setTimeout(r, 50));
    const started = Date.now();
    await running.stop();
    expect(Date.now() - started).toBeLessThan(1_500);
    expect(await hung).toBe("ECONNRESET");
  });

  it("when readiness checks fail, then /readyz answers 503 naming them while /healthz stays 200", async () => {
    const app = createBaseApp({
      logger,
      readiness: [
        { name: "db", check: async () => undefined },
        { name: "queue", check: async () => Promise.reject(new Error("down")) },
        { name: "slow", check: () => new Promise(() => undefined), timeoutMs: 100 },
      ],
    });
    const running = await startServer(app, { port: 0, logger });
    try {
      const ready = await get(`${running.url}/readyz`);
      expect(ready.status).toBe(503);
      expect(JSON.parse(ready.body)).toEqual({
        error: "UNAVAILABLE",
        message: "Not ready: queue, slow",
        checks: { db: "ok", queue: "failed", slow: "failed" },
      });
      expect((await get(`${running.url}/healthz`)).status).toBe(200);
      expect((await get(`${running.url}/healthz`)).headers["x-powered-by"]).toBeUndefined();
    } finally {
      await running.stop();
    }
  });

  it("when a request carries a sane X-Request-Id, then it is echoed; an unsafe one is replaced", async () => {
    const app = createBaseApp({ logger });
    const running = await startServer(app, { port: 0, logger });
    try {
      const sane = await new Promise<http.IncomingMessage>((r) =>
        http.get(`${running.url}/healthz`, { headers: { "x-request-id": "abc-123" } }, r),
      );
      expect(sane.headers["x-request-id"]).toBe("abc-123");
      sane.resume();
      const unsafe = await new Promise<http.IncomingMessage>((r) =>
        http.get(`${running.url}/healthz`, { headers: { "x-request-id": "a b\tc{}".repeat(30) } }, r),
      );
      expect(unsafe.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);
      unsafe.resume();
    } finally {
      await running.stop();
    }
  });
});
