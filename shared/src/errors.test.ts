import http from "node:http";
import type { AddressInfo } from "node:net";
import express from "express";
import * as OpenApiValidator from "express-openapi-validator";
import pino from "pino";
import { Writable } from "node:stream";
import { AppError, errorHandler, errorStatus, notFoundHandler, toAppError } from "./errors";
import { loggingMiddleware } from "./http/logging-middleware";

const spec = {
  openapi: "3.0.3",
  info: { title: "t", version: "1" },
  paths: {
    "/api/v1/settings": {
      patch: {
        requestBody: {
          required: true,
          content: {
            "application/json": {
              schema: {
                type: "object",
                additionalProperties: false,
                properties: {
                  preferences: {
                    type: "object",
                    additionalProperties: false,
                    required: ["fps"],
                    properties: { fps: { type: "integer", enum: [30, 60, 120] } },
                  },
                  fps: { type: "integer", enum: [30, 60, 120] },
                },
              },
            },
          },
        },
        responses: { "200": { description: "ok" } },
      },
    },
  },
};

function captureLogs(): { logger: pino.Logger; lines: () => Record<string, unknown>[] } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      chunks.push(chunk.toString());
      cb();
    },
  });
  return {
    logger: pino({ level: "info" }, stream),
    lines: () =>
      chunks
        .join("")
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

async function withApp(
  build: (app: express.Express) => void,
  run: (base: string) => Promise<void>,
  logger = pino({ level: "silent" }),
): Promise<void> {
  const app = express();
  app.use(loggingMiddleware(logger));
  app.use(express.json({ limit: "1kb" }));
  build(app);
  app.use(notFoundHandler());
  app.use(errorHandler({ logger }));
  const server = http.createServer(app);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  try {
    await run(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  } finally {
    await new Promise((r) => server.close(r));
  }
}

const patch = (base: string, body: string, contentType = "application/json") =>
  fetch(`${base}/api/v1/settings`, { method: "PATCH", headers: { "content-type": contentType }, body });

describe("AppError", () => {
  it("when built from a code, then the status comes from the table", () => {
    expect(new AppError("SESSION_ALREADY_RUNNING", "x").status).toBe(409);
    expect(new AppError("INSUFFICIENT_CREDITS", "x").status).toBe(402);
    expect(AppError.rateLimited(12.2).headers).toEqual({ "Retry-After": "13" });
    expect(AppError.validation("preferences.fps", "must be one of 30, 60").message).toBe(
      "preferences.fps must be one of 30, 60",
    );
    expect(errorStatus.UNAVAILABLE).toBe(503);
  });

  it("when converting an unknown error, then it is INTERNAL with a generic message", () => {
    const converted = toAppError(new Error("select * from secrets failed at db.ts:42"));
    expect(converted.toBody()).toEqual({ error: "INTERNAL", message: "Internal server error" });
  });
});

describe("errorHandler", () => {
  const validated = (app: express.Express) => {
    app.use(
      OpenApiValidator.middleware({
        apiSpec: structuredClone(spec) as never,
        validateRequests: true,
        validateResponses: false,
      }),
    );
    app.patch("/api/v1/settings", (_req, res) => {
      res.json({ ok: true });
    });
  };

  it("when an enum is violated, then 400 VALIDATION_ERROR names the field and its allowed values", async () => {
    await withApp(validated, async (base) => {
      const res = await patch(base, JSON.stringify({ fps: 45 }));
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({
        error: "VALIDATION_ERROR",
        message: "fps must be one of 30, 60, 120",
      });
      const nested = await patch(base, JSON.stringify({ preferences: { fps: 45 } }));
      expect(await nested.json()).toEqual({
        error: "VALIDATION_ERROR",
        message: "preferences.fps must be one of 30, 60, 120",
      });
    });
  });

  it("when an unknown or missing field is sent, then the message names it", async () => {
    await withApp(validated, async (base) => {
      expect(await (await patch(base, JSON.stringify({ foo: 1 }))).json()).toEqual({
        error: "VALIDATION_ERROR",
        message: "Unknown field: foo",
      });
      expect(await (await patch(base, JSON.stringify({ preferences: {} }))).json()).toEqual({
        error: "VALIDATION_ERROR",
        message: "preferences.fps is required",
      });
    });
  });

  it("when the JSON is malformed or too large, then 400/413 VALIDATION_ERROR names body", async () => {
    await withApp(validated, async (base) => {
      const malformed = await patch(base, "{not json");
      expect(malformed.status).toBe(400);
      expect(await malformed.json()).toEqual({
        error: "VALIDATION_ERROR",
        message: "body is not valid JSON",
      });
      const large = await patch(base, JSON.stringify({ fps: 30, pad: "x".repeat(5000) }));
      expect(large.status).toBe(413);
      expect(await large.json()).toEqual({
        error: "VALIDATION_ERROR",
        message: "body is larger than the allowed size",
      });
    });
  });

  it("when a route is unknown or the method is wrong, then 404 NOT_FOUND / 405 with a body", async () => {
    await withApp(validated, async (base) => {
      const missing = await fetch(`${base}/api/v1/nope`);
      expect(missing.status).toBe(404);
      expect(await missing.json()).toEqual({ error: "NOT_FOUND", message: "Route not found" });
      const wrong = await fetch(`${base}/api/v1/settings`, { method: "DELETE" });
      expect(wrong.status).toBe(405);
      expect(wrong.headers.get("allow")).toBe("PATCH");
      expect(await wrong.json()).toEqual({ error: "METHOD_NOT_ALLOWED", message: "Method not allowed" });
    });
  });

  it("when a handler throws an unknown error, then 500 INTERNAL without stack, logged with the request id", async () => {
    const { logger, lines } = captureLogs();
    await withApp(
      (app) =>
        app.get("/boom", () => {
          throw new Error("password=hunter2 at /srv/app/db.ts:42");
        }),
      async (base) => {
        const res = await fetch(`${base}/boom`, { headers: { "x-request-id": "req-123" } });
        expect(res.status).toBe(500);
        const text = await res.text();
        expect(JSON.parse(text)).toEqual({ error: "INTERNAL", message: "Internal server error" });
        expect(text).not.toMatch(/hunter2|db\.ts|at /);
        expect(res.headers.get("x-request-id")).toBe("req-123");
      },
      logger,
    );
    const errorLine = lines().find((l) => l.msg === "unhandled error");
    expect(errorLine).toMatchObject({ requestId: "req-123" });
    expect(JSON.stringify(errorLine)).toContain("hunter2"); // the log keeps the cause; the body does not
  });

  it("when an AppError carries headers, then they are written with the body", async () => {
    await withApp(
      (app) =>
        app.get("/capacity", () => {
          throw new AppError("CLOUD_CAPACITY", "No capacity in the region").withHeaders({
            "Retry-After": "30",
          });
        }),
      async (base) => {
        const res = await fetch(`${base}/capacity`);
        expect(res.status).toBe(503);
        expect(res.headers.get("retry-after")).toBe("30");
        expect(await res.json()).toEqual({ error: "CLOUD_CAPACITY", message: "No capacity in the region" });
      },
    );
  });
});
