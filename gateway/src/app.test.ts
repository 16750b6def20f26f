import http from "node:http";
import {
  startTestIdentityProvider,
  tamperToken,
  type TestIdentityProvider,
} from "@cgs/shared/testing/tokens";
import {
  closedPortUrl,
  startFakeUpstream,
  startTestGateway,
  type TestGateway,
} from "../../test/harnesses/gateway-harness";

const UNAUTHENTICATED = { error: "UNAUTHENTICATED", message: "Missing or invalid bearer token" };
const now = () => Math.floor(Date.now() / 1000);

let idp: TestIdentityProvider;
let gw: TestGateway;

beforeAll(async () => {
  idp = await startTestIdentityProvider();
  gw = await startTestGateway(idp);
});
afterAll(async () => {
  await gw.close();
  await idp.close();
});

const bearer = async (sub = "user-auth"): Promise<Record<string, string>> => ({
  authorization: `Bearer ${await idp.sign({ sub })}`,
});

describe("gateway authentication", () => {
  it("when the bearer is valid, then the request reaches the owning service with the bearer and request id", async () => {
    const token = await idp.sign({ sub: "user-1" });
    const before = gw.upstreams.sessions.requests.length;
    const res = await fetch(`${gw.url}/api/v1/sessions/poll`, {
      headers: {
        authorization: `Bearer ${token}`,
        "x-request-id": "trace-me-1",
        traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      },
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ owner: "sessions", path: "/api/v1/sessions/poll" });
    expect(res.headers.get("x-request-id")).toBe("trace-me-1");
    const seen = gw.upstreams.sessions.requests[before]!;
    expect(seen.headers.authorization).toBe(`Bearer ${token}`);
    expect(seen.headers["x-request-id"]).toBe("trace-me-1");
    expect(seen.headers.traceparent).toMatch(/^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$/);
  });

  const badTokens: [string, () => Promise<string | undefined>][] = [
    ["missing", async () => undefined],
    ["expired", () => idp.sign({ exp: now() - 3600 })],
    ["not yet valid", () => idp.sign({ nbf: now() + 3600 })],
    ["from the wrong issuer", () => idp.sign({ iss: "https://other-idp.example.com/realms/cgs" })],
    ["for the wrong audience", () => idp.sign({ aud: "someone-else" })],
    ["alg none", async () => idp.unsecuredToken()],
    ["HS256 signed with the public key", () => idp.hs256WithPublicKey()],
    ["signed with an unknown kid", () => idp.signWithUnpublishedKey()],
    ["tampered", async () => tamperToken(await idp.sign())],
  ];
  it.each(badTokens)(
    "when the token is %s, then 401 with the exact body and nothing is forwarded",
    async (_name, make) => {
      const token = await make();
      const before = gw.upstreams.billing.requests.length;
      const res = await fetch(`${gw.url}/api/v1/credits/me`, {
        headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
      });
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual(UNAUTHENTICATED);
      expect(gw.upstreams.billing.requests.length).toBe(before);
    },
  );

  it("when the provider rotates its signing key, then tokens from the new key are accepted", async () => {
    const first = await fetch(`${gw.url}/api/v1/credits/me`, { headers: await bearer("before-rotation") });
    expect(first.status).toBe(200);
    await idp.rotate({ keepPrevious: false });
    const res = await fetch(`${gw.url}/api/v1/credits/me`, { headers: await bearer("after-rotation") });
    expect(res.status).toBe(200);
  });

  it("when the browser uses the session cookie, then reads pass and the upstream gets it as a bearer, not a cookie", async () => {
    const token = await idp.sign({ sub: "cookie-user" });
    const before = gw.upstreams.accounts.requests.length;
    const res = await fetch(`${gw.url}/api/v1/settings`, {
      headers: { cookie: `cgs_session=${token}; other=1` },
    });
    expect(res.status).toBe(200);
    const seen = gw.upstreams.accounts.requests[before]!;
    expect(seen.headers.authorization).toBe(`Bearer ${token}`);
    expect(seen.headers.cookie).toBeUndefined();
  });

  it("when a cookie-authenticated write comes from another origin, then it is refused with 401", async () => {
    const cookie = `cgs_session=${await idp.sign({ sub: "cookie-writer" })}`;
    const body = JSON.stringify({ fps: 60 });
    const base = { method: "PATCH", body, headers: { cookie, "content-type": "application/json" } };
    const before = gw.upstreams.accounts.requests.length;
    for (const origin of ["https://evil.example.com", "http://127.0.0.1:9999"]) {
      const res = await fetch(`${gw.url}/api/v1/settings`, { ...base, headers: { ...base.headers, origin } });
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual(UNAUTHENTICATED);
    }
    const noOrigin = await fetch(`${gw.url}/api/v1/settings`, base);
    expect(noOrigin.status).toBe(401);
    expect(gw.upstreams.accounts.requests.length).toBe(before);
    const sameOrigin = await fetch(`${gw.url}/api/v1/settings`, {
      ...base,
      headers: { ...base.headers, origin: "http://127.0.0.1:8080" },
    });
    expect(sameOrigin.status).toBe(200);
  });
});

describe("gateway routing and validation", () => {
  it("when the body violates the schema, then 400 VALIDATION_ERROR names the field and nothing is forwarded", async () => {
    const before = gw.upstreams.accounts.requests.length;
    const patch = async (body: unknown) =>
      fetch(`${gw.url}/api/v1/settings`, {
        method: "PATCH",
        headers: { ...(await bearer("validator")), "content-type": "application/merge-patch+json" },
        body: JSON.stringify(body),
      });
    const badEnum = await patch({ fps: 45 });
    expect(badEnum.status).toBe(400);
    expect(await badEnum.json()).toEqual({
      error: "VALIDATION_ERROR",
      message: "fps must be one of 30, 60, 120",
    });
    expect(await (await patch({ foo: true })).json()).toEqual({
      error: "VALIDATION_ERROR",
      message: "Unknown field: foo",
    });
    const malformed = await fetch(`${gw.url}/api/v1/settings`, {
      method: "PATCH",
      headers: { ...(await bearer("validator")), "content-type": "application/json" },
      body: "{oops",
    });
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toEqual({ error: "VALIDATION_ERROR", message: "body is not valid JSON" });
    expect(gw.upstreams.accounts.requests.length).toBe(before);
  });

  it("when a valid JSON body is sent, then the upstream receives the same bytes", async () => {
    const raw = '{ "amount" : 2000 }';
    const before = gw.upstreams.billing.requests.length;
    const res = await fetch(`${gw.url}/api/v1/credits/topup`, {
      method: "POST",
      headers: { ...(await bearer("topper")), "content-type": "application/json" },
      body: raw,
    });
    expect(res.status).toBe(200);
    const seen = gw.upstreams.billing.requests[before]!;
    expect(seen.body.toString()).toBe(raw);
    expect(seen.headers["content-length"]).toBe(String(Buffer.byteLength(raw)));
  });

  it("when the body is larger than the limit, then 413 VALIDATION_ERROR names body", async () => {
    const res = await fetch(`${gw.url}/api/v1/settings`, {
      method: "PATCH",
      headers: { ...(await bearer("big")), "content-type": "application/json" },
      body: JSON.stringify({ fps: 60, pad: "x".repeat(200_000) }),
    });
    expect(res.status).toBe(413);
    expect(await res.json()).toEqual({
      error: "VALIDATION_ERROR",
      message: "body is larger than the allowed size",
    });
  });

  it("when the Stripe webhook is called, then its raw body and signature reach billing untouched and unvalidated", async () => {
    const raw = '{"id":"evt_1",  "type":"checkout.session.completed",\n "data":{"object":{}}}  not-json-tail';
    const before = gw.upstreams.billing.requests.length;
    const res = await fetch(`${gw.url}/api/v1/billing/stripe-webhook`, {
      method: "POST",
      headers: { "content-type": "application/json", "stripe-signature": "t=1,v1=abc" },
      body: raw,
    });
    expect(res.status).toBe(200);
    const seen = gw.upstreams.billing.requests[before]!;
    expect(seen.body.toString()).toBe(raw);
    expect(seen.headers["stripe-signature"]).toBe("t=1,v1=abc");
    expect(seen.headers.authorization).toBeUndefined();
  });

  it("when the route is unknown, then 404 NOT_FOUND; when the method is wrong, then 405 with Allow", async () => {
    const unknown = await fetch(`${gw.url}/api/v1/nope`, { headers: await bearer() });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({ error: "NOT_FOUND", message: "Route not found" });
    const wrongMethod = await fetch(`${gw.url}/api/v1/sessions/poll`, {
      method: "DELETE",
      headers: await bearer(),
    });
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get("allow")).toBe("GET");
    expect(await wrongMethod.json()).toEqual({
      error: "METHOD_NOT_ALLOWED",
      message: "DELETE is not allowed on /api/v1/sessions/poll; allowed: GET",
    });
    const readyThroughLb = await fetch(`${gw.url}/readyz`, { headers: { "x-forwarded-for": "203.0.113.9" } });
    expect(readyThroughLb.status).toBe(404);
    expect((await fetch(`${gw.url}/readyz`)).status).toBe(200);
    const outside = await fetch(`${gw.url}/wp-admin`);
    expect(outside.status).toBe(404);
    expect(await outside.json()).toEqual({ error: "NOT_FOUND", message: "Route not found" });
  });

  it("when the health endpoint and the contract are requested, then they answer publicly", async () => {
    const health = await fetch(`${gw.url}/api/v1/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: "ok", version: "0.1.0" });
    expect(health.headers.get("x-ratelimit-limit")).toBeNull();
    const doc = await fetch(`${gw.url}/openapi.json`);
    expect(doc.status).toBe(200);
    expect(((await doc.json()) as { openapi: string }).openapi).toMatch(/^3\.0/);
    expect(doc.headers.get("x-ratelimit-limit")).toBe("60");
  });

  it("when an API answer is sent, then it carries the API's security headers and X-Powered-By is not", async () => {
    const answers = [
      await fetch(`${gw.url}/api/v1/health`),
      await fetch(`${gw.url}/api/v1/nope`),
      await fetch(`${gw.url}/api/v1/credits/me`, { headers: await bearer("headers") }),
    ];
    expect(answers.map((res) => res.status)).toEqual([200, 404, 200]);
    for (const res of answers) {
      expect(res.headers.get("x-powered-by")).toBeNull();
      expect(res.headers.get("content-security-policy")).toBe("default-src 'none'; frame-ancestors 'none'");
      expect(res.headers.get("x-frame-options")).toBe("DENY");
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
      expect(res.headers.get("cross-origin-resource-policy")).toBe("same-origin");
      // The page-only headers are for documents, which an API answer never is.
      expect(res.headers.get("x-dns-prefetch-control")).toBeNull();
    }
  });

  it("when anything outside the API is sent, then it carries helmet's page headers", async () => {
    const res = await fetch(`${gw.url}/openapi.json`);
    expect(res.headers.get("x-powered-by")).toBeNull();
    expect(res.headers.get("content-security-policy")).toContain("default-src 'self'");
    expect(res.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("x-frame-options")).toBe("SAMEORIGIN");
    expect(res.headers.get("referrer-policy")).toBe("same-origin");
    expect(res.headers.get("x-dns-prefetch-control")).toBe("off");
  });

  it("when the client sends hop-by-hop headers, then they are not forwarded", async () => {
    const before = gw.upstreams.sessions.requests.length;
    const headers = {
      ...(await bearer("hop")),
      "x-hop-secret": "1",
      connection: "x-hop-secret",
      "proxy-authorization": "Basic x",
    };
    const status = await new Promise<number>((resolve, reject) => {
      http
        .get(`${gw.url}/api/v1/sessions/connect`, { headers }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        })
        .on("error", reject);
    });
    expect(status).toBe(200);
    const seen = gw.upstreams.sessions.requests[before]!;
    expect(seen.headers["x-hop-secret"]).toBeUndefined();
    expect(seen.headers["proxy-authorization"]).toBeUndefined();
    expect(seen.headers["x-forwarded-for"]).toBe("127.0.0.1");
  });
});

describe("gateway upstream failures", () => {
  it("when the owning service is down, then 503 UNAVAILABLE answers in under a second", async () => {
    const down = await startTestGateway(idp, { env: { SESSIONS_URL: await closedPortUrl() } });
    try {
      const started = Date.now();
      const res = await fetch(`${down.url}/api/v1/sessions/poll`, { headers: await bearer("down") });
      expect(Date.now() - started).toBeLessThan(1_000);
      expect(res.status).toBe(503);
      expect(res.headers.get("retry-after")).toBe("5");
      expect(await res.json()).toEqual({
        error: "UNAVAILABLE",
        message: "The sessions service is unavailable",
      });
    } finally {
      await down.close();
    }
  });

  it("when the owning service does not answer in time, then 503 UNAVAILABLE after the timeout", async () => {
    const silent = await startFakeUpstream("sessions", () => undefined);
    const slow = await startTestGateway(idp, {
      env: { SESSIONS_URL: silent.url, UPSTREAM_TIMEOUT_MS: "300" },
    });
    try {
      const started = Date.now();
      const res = await fetch(`${slow.url}/api/v1/sessions/poll`, { headers: await bearer("slow") });
      expect(Date.now() - started).toBeLessThan(1_500);
      expect(res.status).toBe(503);
      expect(await res.json()).toEqual({
        error: "UNAVAILABLE",
        message: "The sessions service did not answer in time",
      });
    } finally {
      await slow.close();
      await silent.close();
    }
  });

  it("when the service answers with an error, then status, body and headers pass through", async () => {
    const conflict = await startTestGateway(idp, {
      upstreamHandler: (_req, res) => {
        res.writeHead(409, {
          "content-type": "application/json",
          "x-powered-by": "Express",
          connection: "keep-alive",
        });
        res.end(JSON.stringify({ error: "SESSION_ALREADY_RUNNING", message: "A session is already active" }));
      },
    });
    try {
      const res = await fetch(`${conflict.url}/api/v1/sessions/start`, {
        method: "POST",
        headers: { ...(await bearer("conflict")), "content-type": "application/json" },
        body: "{}",
      });
      expect(res.status).toBe(409);
      expect(res.headers.get("x-powered-by")).toBeNull();
      expect(res.headers.get("x-ratelimit-limit")).toBe("20");
      expect(await res.json()).toEqual({
        error: "SESSION_ALREADY_RUNNING",
        message: "A session is already active",
      });
    } finally {
      await conflict.close();
    }
  });
});
