import { startTestIdentityProvider, type TestIdentityProvider } from "@cgs/shared/testing/tokens";
import { startTestGateway, type TestGateway } from "../../../test/harnesses/gateway-harness";

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

interface Hit {
  status: number;
  limit: string | null;
  remaining: string | null;
  reset: string | null;
  retryAfter: string | null;
  body: unknown;
}

async function hit(path: string, init: RequestInit = {}): Promise<Hit> {
  const res = await fetch(`${gw.url}${path}`, init);
  const body: unknown = await res.json().catch(() => undefined);
  return {
    status: res.status,
    limit: res.headers.get("x-ratelimit-limit"),
    remaining: res.headers.get("x-ratelimit-remaining"),
    reset: res.headers.get("x-ratelimit-reset"),
    retryAfter: res.headers.get("retry-after"),
    body,
  };
}

async function hitMany(n: number, path: string, init: () => Promise<RequestInit>): Promise<Hit[]> {
  const out: Hit[] = [];
  for (let i = 0; i < n; i++) out.push(await hit(path, await init()));
  return out;
}

const as =
  (sub: string, extra: RequestInit = {}) =>
  async (): Promise<RequestInit> => ({
    ...extra,
    headers: {
      authorization: `Bearer ${await idp.sign({ sub })}`,
      ...(extra.headers as Record<string, string> | undefined),
    },
  });

function expectBucket(hits: Hit[], limit: number): void {
  const nowSeconds = Date.now() / 1000;
  hits.slice(0, limit).forEach((h, i) => {
    expect(h.status).toBe(200);
    expect(h.limit).toBe(String(limit));
    expect(h.remaining).toBe(String(limit - i - 1));
    expect(h.retryAfter).toBeNull();
  });
  const blocked = hits[limit]!;
  expect(blocked.status).toBe(429);
  expect(blocked.body).toEqual({
    error: "RATE_LIMITED",
    message: expect.stringMatching(/^Too many requests/),
  });
  expect(blocked.limit).toBe(String(limit));
  expect(blocked.remaining).toBe("0");
  const reset = Number(blocked.reset);
  expect(reset).toBeGreaterThan(nowSeconds);
  expect(reset).toBeLessThanOrEqual(Math.ceil(nowSeconds) + 60);
  const retryAfter = Number(blocked.retryAfter);
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(60);
}

describe("per-account rate limits", () => {
  it("when an account makes 61 reads in a window, then the 61st answers 429 with the limit headers", async () => {
    const hits = await hitMany(61, "/api/v1/credits/me", as("reader"));
    expectBucket(hits, 60);
  });

  it("when an account makes 21 writes in a window, then the 21st answers 429", async () => {
    const hits = await hitMany(21, "/api/v1/sessions/stop", as("writer", { method: "POST" }));
    expectBucket(hits, 20);
  });

  it("when an account polls 31 times in a window, then the 31st answers 429 and other buckets and accounts are untouched", async () => {
    const hits = await hitMany(31, "/api/v1/sessions/poll", as("poller"));
    expectBucket(hits, 30);
    const read = await hit("/api/v1/sessions/connect", await as("poller")());
    expect(read.status).toBe(200);
    expect(read.remaining).toBe("59");
    const write = await hit("/api/v1/sessions/pair", await as("poller", { method: "POST" })());
    expect(write.status).toBe(200);
    expect(write.remaining).toBe("19");
    const otherAccount = await hit("/api/v1/sessions/poll", await as("other-poller")());
    expect(otherAccount.status).toBe(200);
    expect(otherAccount.remaining).toBe("29");
  });

  it("when a token is refreshed, then the account keeps its budget (keyed by sub, not by token)", async () => {
    await hitMany(3, "/api/v1/billing/storage", as("refresher"));
    const next = await hit("/api/v1/billing/storage", await as("refresher")());
    expect(next.remaining).toBe("56");
  });
});

describe("public rate limits", () => {
  it("when one IP requests password resets, then its write:ip bucket limits it and the health check stays unlimited", async () => {
    const reset = await hit("/api/v1/auth/password-reset/complete", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ token: "t", password: "long-enough-password" }),
    });
    expect(reset.status).toBe(200);
    expect(reset.limit).toBe("20");
    const health = await hit("/api/v1/health");
    expect(health.limit).toBeNull();
  });

  it("when the same e-mail asks for resets repeatedly, then the per-e-mail bucket answers 429 after 5", async () => {
    const request = () =>
      hit("/api/v1/auth/password-reset/request", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ email: "Victim@Example.com" }),
      });
    const hits: Hit[] = [];
    for (let i = 0; i < 6; i++) hits.push(await request());
    expect(hits.slice(0, 5).map((h) => h.status)).toEqual([200, 200, 200, 200, 200]);
    expect(hits[5]!.status).toBe(429);
    expect(Number(hits[5]!.retryAfter)).toBeGreaterThan(60);
  });

  it("when requests fail authentication, then they are counted per client IP", async () => {
    const first = await hit("/api/v1/settings");
    expect(first.status).toBe(401);
    expect(first.limit).toBe("60");
    const second = await hit("/api/v1/settings");
    expect(Number(second.remaining)).toBe(Number(first.remaining) - 1);
  });
});
