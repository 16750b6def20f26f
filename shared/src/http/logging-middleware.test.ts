import { Writable } from "node:stream";
import { context, trace } from "@opentelemetry/api";
import express from "express";
import pino from "pino";
import { setupTestTracing } from "../testing/tracing";
import { createBaseApp, installErrorHandlers } from "./base-app";
import { isoTimeOncePerMs, redactedLogPaths } from "./logger";
import { loggingMiddleware } from "./logging-middleware";
import { startServer } from "./server";

function capture(): { stream: Writable; lines: () => string[] } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      chunks.push(chunk.toString());
      cb();
    },
  });
  return { stream, lines: () => chunks.join("").split("\n").filter(Boolean) };
}

describe("loggingMiddleware", () => {
  it("when a request carries credentials, then no log line contains them and every line has the request id", async () => {
    const chunks: string[] = [];
    const stream = new Writable({
      write(chunk: Buffer, _enc, cb) {
        chunks.push(chunk.toString());
        cb();
      },
    });
    const logger = pino({ level: "info", redact: redactedLogPaths }, stream);
    const app = createBaseApp({ logger });
    app.get("/work", (req, res) => {
      req.log.info({ step: "inside" }, "doing work");
      res.json({ ok: true });
    });
    installErrorHandlers(app, { logger });
    const running = await startServer(app, { port: 0, logger: pino({ level: "silent" }) });
    try {
      const res = await fetch(`${running.url}/work?token=reset-secret`, {
        headers: {
          authorization: "Bearer secret-token-value",
          cookie: "cgs_session=secret-cookie-value",
          "x-request-id": "rid-42",
        },
      });
      expect(res.status).toBe(200);
    } finally {
      await running.stop();
    }
    const lines = chunks
      .join("")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.map((l) => l.msg)).toEqual(expect.arrayContaining(["doing work", "request completed"]));
    for (const line of lines) expect(line.requestId).toBe("rid-42");
    const all = chunks.join("");
    expect(all).not.toMatch(/secret-token-value|secret-cookie-value|reset-secret/);
    expect(lines.find((l) => l.msg === "request completed")).toMatchObject({
      req: { method: "GET", path: "/work" },
      res: { statusCode: 200 },
    });
  });

  it("when a request is served inside a span, then its access line is the line pino itself writes, with the span's trace fields", async () => {
    const tracing = setupTestTracing({ instrument: false });
    const direct = capture();
    const throughPino = capture();
    const options = {
      level: "info",
      name: "svc",
      base: { service: "svc", version: "1.2.3" },
      redact: { paths: redactedLogPaths, censor: "[redacted]" },
      timestamp: isoTimeOncePerMs,
    };
    const loggers = {
      direct: pino(options, direct.stream),
      // A write hook makes the middleware log through pino's own path: the reference line.
      throughPino: pino({ ...options, hooks: { streamWrite: (line: string) => line } }, throughPino.stream),
    };
    const spanIds: string[] = [];
    const servers = await Promise.all(
      Object.values(loggers).map((logger) => {
        const app = express();
        app.use((_req, _res, next) => {
          const span = trace.getTracer("test").startSpan("GET");
          spanIds.push(span.spanContext().spanId);
          context.with(trace.setSpan(context.active(), span), next);
        });
        app.use(loggingMiddleware(logger));
        app.get("/games/:id", (_req, res) => res.status(201).json({ ok: true }));
        return startServer(app, { port: 0, logger: pino({ level: "silent" }) });
      }),
    );
    try {
      for (const server of servers) {
        const res = await fetch(`${server.url}/games/7?token=secret`, {
          headers: { "user-agent": 'agent "quoted" \\ ünïcode\ttab', "x-request-id": "rid-7" },
        });
        expect(res.status).toBe(201);
      }
    } finally {
      await Promise.all(servers.map((s) => s.stop()));
      await tracing.shutdown();
    }
    const [line] = direct.lines();
    const [reference] = throughPino.lines();
    const parsed = JSON.parse(line!) as Record<string, unknown>;
    expect(parsed).toMatchObject({
      level: 30,
      service: "svc",
      version: "1.2.3",
      name: "svc",
      span_id: spanIds[0],
      trace_flags: "01",
      requestId: "rid-7",
      req: { method: "GET", path: "/games/7", userAgent: 'agent "quoted" \\ ünïcode\ttab' },
      res: { statusCode: 201 },
      msg: "request completed",
    });
    expect(parsed.trace_id).toMatch(/^[0-9a-f]{32}$/);
    // Byte for byte the same, but for the fields that differ between the two requests.
    const varying = /"(time|trace_id|span_id)":"[^"]*"|"responseTime":\d+/g;
    expect(line!.replace(varying, "$1")).toBe(reference!.replace(varying, "$1"));
  });
});
