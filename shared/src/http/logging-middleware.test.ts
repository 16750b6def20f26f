import { Writable } from "node:stream";
import pino from "pino";
import { createBaseApp, installErrorHandlers } from "./base-app";
import { redactedLogPaths } from "./logger";
import { startServer } from "./server";

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
});
