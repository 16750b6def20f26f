import express, { type ErrorRequestHandler } from "express";
import * as OpenApiValidator from "express-openapi-validator";
import type { OpenAPIV3 } from "express-openapi-validator/dist/framework/types";
import { existsSync } from "node:fs";
import request from "supertest";
import { listOperations, loadOpenApiDocument, openapiPath, type OpenApiDocument } from "./openapi";

interface ValidatorErrorBody {
  status: number;
  errors: Array<{ path: string; message: string }>;
}

/** A bare app: the contract's validator, then a catch-all that echoes what passed validation. */
function createValidatedApp(doc: OpenApiDocument): express.Express {
  const app = express();
  app.use(express.json({ type: ["application/json", "application/merge-patch+json"] }));
  // The validator's cookieAuth check reads req.cookies, which Express 5 leaves unset.
  app.use((req, _res, next) => {
    const pairs = (req.headers.cookie ?? "").split(";").map((part) => part.trim().split("="));
    req.cookies = Object.fromEntries(pairs.filter((p) => p.length === 2));
    next();
  });
  app.use(
    OpenApiValidator.middleware({
      apiSpec: doc as unknown as OpenAPIV3.DocumentV3,
      validateRequests: true,
      validateResponses: false,
    }),
  );
  app.use((req, res) => {
    res.status(200).json({ passed: true, body: req.body ?? null });
  });
  const onError: ErrorRequestHandler = (err: { status?: number; errors?: unknown }, _req, res, _next) => {
    res.status(err.status ?? 500).json({ status: err.status ?? 500, errors: err.errors ?? [] });
  };
  app.use(onError);
  return app;
}

const BEARER = { Authorization: "Bearer any-token-the-gateway-verifies-later" };

describe("openapi document", () => {
  const doc = loadOpenApiDocument();

  it("when loaded, then it is OpenAPI 3.0.3 version 1.0.0 read from shared/openapi.json", () => {
    expect(existsSync(openapiPath)).toBe(true);
    expect(openapiPath.endsWith("shared/openapi.json")).toBe(true);
    expect(doc.openapi).toBe("3.0.3");
    expect(doc.info.version).toBe("1.0.0");
    expect(loadOpenApiDocument()).toBe(doc);
  });

  it("when listing operations, then every spec endpoint appears with its owner and public flag", () => {
    const summary = listOperations(doc)
      .map((o) => `${o.method.toUpperCase()} ${o.path} ${o.owner}${o.public ? " public" : ""}`)
      .sort();
    expect(summary).toEqual(
      [
        "POST /api/v1/sessions/start sessions",
        "POST /api/v1/sessions/stop sessions",
        "GET /api/v1/sessions/poll sessions",
        "POST /api/v1/sessions/keepalive sessions",
        "POST /api/v1/sessions/pair sessions",
        "GET /api/v1/sessions/connect sessions",
        "POST /api/v1/sessions/vpn-key sessions",
        "GET /api/v1/credits/me billing",
        "GET /api/v1/credits/transactions billing",
        "GET /api/v1/credits/auto-recharge billing",
        "PATCH /api/v1/credits/auto-recharge billing",
        "POST /api/v1/credits/payment-method billing",
        "DELETE /api/v1/credits/payment-method billing",
        "GET /api/v1/credits/limits billing",
        "PATCH /api/v1/credits/limits billing",
        "GET /api/v1/devices sessions",
        "POST /api/v1/credits/topup billing",
        "GET /api/v1/billing/storage billing",
        "POST /api/v1/billing/stripe-webhook billing public",
        "GET /api/v1/settings accounts",
        "PATCH /api/v1/settings accounts",
        "GET /api/v1/session accounts",
        "DELETE /api/v1/account/delete accounts",
        "DELETE /api/v1/devices/{id} sessions",
        "GET /api/v1/health gateway public",
        "GET /api/v1/regions sessions",
        "POST /api/v1/auth/password-reset/request auth-proxy public",
        "POST /api/v1/auth/password-reset/complete auth-proxy public",
      ].sort(),
    );
  });

  it("when listing operations, then only health is unlimited and poll has its own bucket", () => {
    const ops = listOperations(doc);
    expect(ops.filter((o) => o.rateLimit === null).map((o) => o.operationId)).toEqual(["getHealth"]);
    expect(ops.find((o) => o.operationId === "pollSession")?.rateLimit).toEqual({
      bucket: "poll",
      scope: "account",
    });
    for (const o of ops.filter((x) => x.public && x.rateLimit !== null)) {
      expect(o.rateLimit?.scope).toBe("ip");
    }
    expect(ops.filter((o) => o.rawBody).map((o) => o.operationId)).toEqual(["receiveStripeWebhook"]);
  });

  it("when an operation lacks a valid x-owner, then listOperations throws naming it", () => {
    const broken = structuredClone(doc);
    const health = broken.paths["/api/v1/health"]?.get;
    if (health === undefined) throw new Error("health operation missing");
    (health as unknown as Record<string, unknown>)["x-owner"] = "nobody";
    expect(() => listOperations(broken)).toThrow("GET /api/v1/health");
  });

  it("when inspecting responses, then authenticated ops list 401 and 429, limited ops 429, all ops 500", () => {
    for (const o of listOperations(doc)) {
      const responses = Object.keys(doc.paths[o.path]?.[o.method]?.responses ?? {});
      expect(responses).toContain("500");
      if (!o.public) expect(responses).toEqual(expect.arrayContaining(["401", "429"]));
      if (o.rateLimit !== null) expect(responses).toContain("429");
    }
  });
});

describe("openapi document under express-openapi-validator", () => {
  const doc = loadOpenApiDocument();
  const app = createValidatedApp(structuredClone(doc));

  it("when PATCH /api/v1/settings has fps 45, then 400 and the error path names fps", async () => {
    const res = await request(app)
      .patch("/api/v1/settings")
      .set(BEARER)
      .set("Content-Type", "application/merge-patch+json")
      .send(JSON.stringify({ fps: 45 }));
    const body = res.body as ValidatorErrorBody;
    expect(res.status).toBe(400);
    expect(body.errors[0]?.path).toBe("/body/fps");
  });

  it("when PATCH /api/v1/settings has an unknown field, then 400 naming it", async () => {
    const res = await request(app)
      .patch("/api/v1/settings")
      .set(BEARER)
      .send({ fps: 60, colourScheme: "dark" });
    const body = res.body as ValidatorErrorBody;
    expect(res.status).toBe(400);
    expect(body.errors[0]?.path).toBe("/body/colourScheme");
  });

  it("when PATCH /api/v1/settings sets a field to null, then 400 naming it", async () => {
    const res = await request(app)
      .patch("/api/v1/settings")
      .set(BEARER)
      .set("Content-Type", "application/merge-patch+json")
      .send(JSON.stringify({ codec: null }));
    const body = res.body as ValidatorErrorBody;
    expect(res.status).toBe(400);
    expect(body.errors[0]?.path).toBe("/body/codec");
  });

  it("when PATCH /api/v1/settings is a valid merge patch, then it passes without defaults injected", async () => {
    const res = await request(app)
      .patch("/api/v1/settings")
      .set(BEARER)
      .set("Content-Type", "application/merge-patch+json")
      .send(JSON.stringify({ fps: 120, codec: "av1" }));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ passed: true, body: { fps: 120, codec: "av1" } });
  });

  it("when password-reset complete has a 5-character password, then 400 naming password", async () => {
    const res = await request(app)
      .post("/api/v1/auth/password-reset/complete")
      .send({ token: "t0ken", password: "short" });
    const body = res.body as ValidatorErrorBody;
    expect(res.status).toBe(400);
    expect(body.errors[0]?.path).toBe("/body/password");
  });

  it("when password-reset request has a valid e-mail and no credentials, then it passes", async () => {
    const res = await request(app)
      .post("/api/v1/auth/password-reset/request")
      .send({ email: "a@example.com" });
    expect(res.status).toBe(200);
  });

  it("when topup amount is a string, then 400 naming amount", async () => {
    const res = await request(app).post("/api/v1/credits/topup").set(BEARER).send({ amount: "2000" });
    const body = res.body as ValidatorErrorBody;
    expect(res.status).toBe(400);
    expect(body.errors[0]?.path).toBe("/body/amount");
  });

  it("when topup amount is below the minimum, then 400 naming amount", async () => {
    const res = await request(app).post("/api/v1/credits/topup").set(BEARER).send({ amount: 499 });
    const body = res.body as ValidatorErrorBody;
    expect(res.status).toBe(400);
    expect(body.errors[0]?.path).toBe("/body/amount");
  });

  it("when sessions/start has no body, then it passes (the body is optional)", async () => {
    const res = await request(app).post("/api/v1/sessions/start").set(BEARER);
    expect(res.status).toBe(200);
  });

  it("when sessions/start names a malformed region, then 400 naming region", async () => {
    const res = await request(app).post("/api/v1/sessions/start").set(BEARER).send({ region: "Mars" });
    const body = res.body as ValidatorErrorBody;
    expect(res.status).toBe(400);
    expect(body.errors[0]?.path).toBe("/body/region");
  });

  it("when an authenticated operation has neither bearer token nor cookie, then the validator answers 401", async () => {
    const res = await request(app).get("/api/v1/credits/me");
    expect(res.status).toBe(401);
  });

  it("when an authenticated operation carries only the cgs_session cookie, then it passes", async () => {
    const res = await request(app).get("/api/v1/credits/me").set("Cookie", "cgs_session=abc");
    expect(res.status).toBe(200);
  });

  it("when GET /api/v1/health has no credentials, then it passes", async () => {
    const res = await request(app).get("/api/v1/health");
    expect(res.status).toBe(200);
  });

  it("when the Stripe webhook lacks Stripe-Signature, then 400 naming the header", async () => {
    const res = await request(app)
      .post("/api/v1/billing/stripe-webhook")
      .send({ id: "evt_1", type: "checkout.session.completed", data: { object: {} } });
    const body = res.body as ValidatorErrorBody;
    expect(res.status).toBe(400);
    expect(body.errors[0]?.path).toBe("/headers/stripe-signature");
  });

  it("when the path is not in the contract, then the validator answers 404", async () => {
    const res = await request(app).get("/api/v1/nothing-here").set(BEARER);
    expect(res.status).toBe(404);
  });
});
