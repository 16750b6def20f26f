import { refreshGrant, uniqueEmail } from "@cgs/shared/testing/keycloak";
import type { LaunchedPlatform } from "../../../test/platform/launch-platform";
import { ApiError, createClient, SessionExpiredError, type Session } from "./index";
import {
  expiredCopy,
  fundAccount,
  launchClientPlatform,
  localSession,
  recordingFetch,
} from "../../../test/harnesses/client-platform";

// Every SDK call through a real gateway (`npm start` on ports 18580-18584) with the real Keycloak.
// Run under `flock /tmp/cgs-platform.lock`.
let platform: LaunchedPlatform;
let sessionsPort: number;

// Two simulated regions, the far one configured first: only a measurement puts the near one first.
const REGIONS = JSON.stringify([
  { id: "us-east-1", name: "US East (N. Virginia)", simulator: { latencyMs: 120 } },
  { id: "eu-west-1", name: "Europe (Ireland)", simulator: { latencyMs: 15 } },
]);

beforeAll(async () => {
  platform = await launchClientPlatform(18580, {
    RATE_LIMIT_WINDOW_MS: "4000",
    RATE_LIMIT_POLL: "10",
    REGIONS,
  });
  sessionsPort = platform.servicePorts[0]!;
}, 180_000);
afterAll(() => platform?.cleanup());

const injectCapacityFailures = async (count: number) => {
  const res = await fetch(`http://127.0.0.1:${sessionsPort}/internal/v1/simulator/faults`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ failNextLaunches: count }),
  });
  expect(res.ok).toBe(true);
};

/** Every simulated region full (or not), or only `region`. */
const setCapacityExhausted = async (exhausted: boolean, region?: string) => {
  const res = await fetch(`http://127.0.0.1:${sessionsPort}/internal/v1/simulator/faults`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ capacityExhausted: exhausted, ...(region ? { region } : {}) }),
  });
  expect(res.ok).toBe(true);
};

describe("the SDK's resource groups through the gateway", () => {
  test("when a funded player uses every resource, then each call answers the contract's shapes", async () => {
    const email = uniqueEmail("sdk-all");
    const client = createClient({ baseUrl: platform.base, session: localSession(email) });

    const identity = await client.account.identity();
    expect(identity).toMatchObject({ email, authMethod: "bearer", deletion: null });
    const empty = await client.credits.me();
    expect(empty).toMatchObject({ balance: 0, currency: expect.stringMatching(/^[A-Z]{3}$/) });
    await fundAccount(client);
    // The first storage period is charged from the first top-up.
    expect((await client.credits.me()).balance).toBeGreaterThan(0);
    expect(await client.billing.storage()).toMatchObject({
      tier: expect.any(String),
      period: expect.any(Object),
    });
    const prefs = await client.settings.get();
    expect(prefs.fps).toEqual(expect.any(Number));
    expect(await client.settings.update({ fps: 30 })).toMatchObject({ ...prefs, fps: 30 });
    expect(await client.sessions.poll()).toMatchObject({ state: "idle", ready: false });

    const started = await client.sessions.start();
    expect(started.state).toBe("starting");
    const seen: string[] = [];
    const ready = await client.sessions.waitUntilReady({
      onProgress: (s, elapsed) => {
        seen.push(s.state);
        expect(elapsed).toBeGreaterThanOrEqual(0);
      },
      timeoutMs: 30_000,
    });
    expect(ready).toMatchObject({ state: "running", ready: true, instanceId: expect.any(String) });
    expect(seen.at(-1)).toBe("running");
    expect((await client.sessions.pair()).pin).toMatch(/^\d{4}$/);
    expect(await client.sessions.connect()).toMatchObject({
      privateNetIp: ready.privateNetIp,
      port: expect.any(Number),
    });
    expect((await client.sessions.vpnKey()).key).toEqual(expect.any(String));
    expect((await client.sessions.stop()).state).toBe("stopping");
    const stopped = await client.sessions.waitUntilStopped({ timeoutMs: 30_000 });
    expect(["stopped", "idle"]).toContain(stopped.state);

    const deletion = await client.account.delete();
    expect(deletion.status).toBe("pending_deletion");
    const refused = await client.sessions.start().catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ApiError);
    expect(refused).toMatchObject({
      code: "ACCOUNT_PENDING_DELETION",
      status: 409,
      requestId: expect.any(String),
    });
  }, 90_000);

  test("when the session is already running, then start rejects with SESSION_ALREADY_RUNNING and no retry", async () => {
    const recorder = recordingFetch();
    const client = createClient({
      baseUrl: platform.base,
      session: localSession(uniqueEmail("sdk-409")),
      fetch: recorder.fetch,
    });
    await fundAccount(client);
    await client.sessions.start();
    const before = recorder.calls.length;
    const error = await client.sessions.start().catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "SESSION_ALREADY_RUNNING", status: 409 });
    expect(recorder.calls.length - before).toBe(1);
    await client.sessions.stop();
  }, 60_000);
});

describe("waiting for a session", () => {
  test("when the wait is shorter than the boot or is aborted, then waitUntilReady stops polling and says why", async () => {
    const client = createClient({ baseUrl: platform.base, session: localSession(uniqueEmail("sdk-wait")) });
    await fundAccount(client);
    await client.sessions.start();
    const timedOut = await client.sessions.waitUntilReady({ timeoutMs: 1_000 }).catch((e: unknown) => e);
    expect(timedOut).toBeInstanceOf(ApiError);
    expect(timedOut).toMatchObject({
      code: "TIMEOUT",
      message: expect.stringMatching(/still (starting|running)/),
    });
    const aborted = await client.sessions
      .waitUntilReady({ signal: AbortSignal.abort() })
      .catch((e: unknown) => e);
    expect((aborted as Error).name).toBe("AbortError");
    await client.sessions.stop();
  }, 30_000);
});

describe("regions", () => {
  test("when two regions differ in latency, then measure lists the nearer first and a start with auto lands there", async () => {
    const startBodies: unknown[] = [];
    const client = createClient({
      baseUrl: platform.base,
      session: localSession(uniqueEmail("sdk-regions")),
      fetch: async (input, init) => {
        const request = new Request(input, init);
        if (request.url.endsWith("/api/v1/sessions/start")) startBodies.push(await request.clone().json());
        return globalThis.fetch(request);
      },
    });
    expect((await client.regions.list()).map((r) => r.id)).toEqual(["us-east-1", "eu-west-1"]);
    const measured = await client.regions.measure({ samples: 3 });
    expect(measured).toEqual([
      {
        id: "eu-west-1",
        name: "Europe (Ireland)",
        rttMs: expect.any(Number),
        samples: 3,
        available: true,
        queueLength: 0,
      },
      {
        id: "us-east-1",
        name: "US East (N. Virginia)",
        rttMs: expect.any(Number),
        samples: 3,
        available: true,
        queueLength: 0,
      },
    ]);
    expect(measured[0]!.rttMs).toBeGreaterThanOrEqual(15);
    expect(measured[0]!.rttMs).toBeLessThan(100);
    expect(measured[1]!.rttMs).toBeGreaterThanOrEqual(120);

    await fundAccount(client);
    const started = await client.sessions.start({ region: "auto" });
    expect(started.state).toBe("starting");
    // Configured order alone would have chosen us-east-1: the measured round trips went with the start.
    expect(startBodies).toEqual([
      { region: "auto", rttMs: { "eu-west-1": expect.any(Number), "us-east-1": expect.any(Number) } },
    ]);
    const ready = await client.sessions.waitUntilReady({ timeoutMs: 30_000 });
    expect(ready).toMatchObject({ state: "running", region: "eu-west-1" });
    await client.sessions.stop();
    await client.sessions.waitUntilStopped({ timeoutMs: 30_000 });
  }, 60_000);

  test("when every region is full and the start may queue, then it waits in line, reports its place and starts when a machine frees", async () => {
    const client = createClient({ baseUrl: platform.base, session: localSession(uniqueEmail("sdk-queue")) });
    await fundAccount(client);
    await setCapacityExhausted(true);
    try {
      const queued = await client.sessions.start({ regions: ["eu-west-1", "us-east-1"], queue: true });
      expect(queued).toMatchObject({
        state: "queued",
        region: null,
        queue: { position: 1, estimatedWaitSeconds: expect.any(Number), regions: ["eu-west-1", "us-east-1"] },
      });
      const places: number[] = [];
      const freed = setTimeout(() => void setCapacityExhausted(false, "eu-west-1"), 3_000);
      const left = await client.sessions.waitWhileQueued({
        onProgress: (s) => {
          if (s.queue) places.push(s.queue.position);
        },
      });
      clearTimeout(freed);
      expect(places.length).toBeGreaterThan(0);
      expect(places.every((p) => p === 1)).toBe(true);
      expect(["starting", "running"]).toContain(left.state);
      expect(await client.sessions.waitUntilReady({ timeoutMs: 30_000 })).toMatchObject({
        region: "eu-west-1",
      });
      await client.sessions.stop();
      await client.sessions.waitUntilStopped({ timeoutMs: 30_000 });
    } finally {
      await setCapacityExhausted(false);
    }
  }, 60_000);
});

describe("session refresh", () => {
  test("when the access token has expired, then 20 concurrent calls share one refresh and the old refresh token is dead", async () => {
    const real = localSession(uniqueEmail("sdk-refresh"));
    const recorder = recordingFetch();
    const changes: Session[] = [];
    const client = createClient({
      baseUrl: platform.base,
      session: { accessToken: expiredCopy(real.accessToken), refreshToken: real.refreshToken },
      onSessionChange: (s) => void changes.push(s),
      fetch: recorder.fetch,
    });
    const results = await Promise.all(Array.from({ length: 20 }, () => client.credits.me()));
    expect(results).toHaveLength(20);
    expect(results.every((r) => r.currency.length === 3)).toBe(true);

    const tokenCalls = recorder.calls.filter((c) => c.url.endsWith("/protocol/openid-connect/token"));
    expect(tokenCalls).toHaveLength(1);
    expect(recorder.calls.filter((c) => c.url.includes("/api/v1/") && c.status === 401)).toHaveLength(0);
    expect(changes).toHaveLength(1);
    expect(changes[0]!.refreshToken).not.toBe(real.refreshToken);
    expect(client.session).toEqual(changes[0]);
    expect((await client.credits.me()).currency).toBe(results[0]!.currency);

    const reused = await refreshGrant(real.refreshToken);
    expect(reused.status).toBe(400);
    expect(reused.error).toBe("invalid_grant");
  });

  test("when the API refuses a token with a bad signature, then the session refreshes once and the call succeeds", async () => {
    const real = localSession(uniqueEmail("sdk-401"));
    const forged = expiredCopy(real.accessToken, 3600);
    const recorder = recordingFetch();
    const changes: Session[] = [];
    const client = createClient({
      baseUrl: platform.base,
      session: { accessToken: forged, refreshToken: real.refreshToken },
      onSessionChange: (s) => void changes.push(s),
      fetch: recorder.fetch,
    });
    expect((await client.credits.me()).balance).toBe(0);
    const api = recorder.calls.filter((c) => c.url.endsWith("/api/v1/credits/me")).map((c) => c.status);
    expect(api).toEqual([401, 200]);
    expect(changes).toHaveLength(1);
  });

  test("when a plain API key has a bad signature, then the call rejects with UNAUTHENTICATED and a request id", async () => {
    const forged = expiredCopy(localSession(uniqueEmail("sdk-key")).accessToken, 3600);
    const error = await createClient({ baseUrl: platform.base, apiKey: forged })
      .credits.me()
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({
      code: "UNAUTHENTICATED",
      status: 401,
      message: "Missing or invalid bearer token",
      requestId: expect.any(String),
    });
  });

  test("when the refresh token was already used, then the call rejects with a SessionExpiredError saying to sign in", async () => {
    const real = localSession(uniqueEmail("sdk-dead"));
    expect((await refreshGrant(real.refreshToken)).status).toBe(200);
    const client = createClient({
      baseUrl: platform.base,
      session: { accessToken: expiredCopy(real.accessToken), refreshToken: real.refreshToken },
    });
    const error = await client.credits.me().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SessionExpiredError);
    expect(error).toMatchObject({ code: "SESSION_EXPIRED", status: 401 });
    expect((error as Error).message).toMatch(/sign in again.*invalid_grant/);
  });
});

describe("retries", () => {
  test("when polls exceed the gateway's limit, then the SDK waits Retry-After and every poll succeeds", async () => {
    const recorder = recordingFetch();
    const client = createClient({
      baseUrl: platform.base,
      session: localSession(uniqueEmail("sdk-429")),
      fetch: recorder.fetch,
    });
    const polls = await Promise.all(Array.from({ length: 14 }, () => client.sessions.poll()));
    expect(polls.every((p) => p.state === "idle")).toBe(true);
    const statuses = recorder.calls.filter((c) => c.url.endsWith("/sessions/poll")).map((c) => c.status);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(4);
    expect(statuses.filter((s) => s === 200)).toHaveLength(14);
  }, 30_000);

  test("when the cloud is out of capacity once, then start is retried with the same Idempotency-Key and starts once", async () => {
    const keys: (string | null)[] = [];
    const statuses: number[] = [];
    const client = createClient({
      baseUrl: platform.base,
      session: localSession(uniqueEmail("sdk-503")),
      fetch: async (input, init) => {
        const request = new Request(input, init);
        const res = await fetch(request);
        if (request.url.endsWith("/sessions/start")) {
          keys.push(request.headers.get("idempotency-key"));
          statuses.push(res.status);
        }
        return res;
      },
    });
    await fundAccount(client);
    await injectCapacityFailures(1);
    const started = await client.sessions.start();
    expect(started.state).toBe("starting");
    expect(statuses).toEqual([503, 200]);
    expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(keys[1]).toBe(keys[0]);
    await client.sessions.stop();
  }, 60_000);

  test("when the gateway cannot be reached, then reads are retried a bounded number of times and writes are not", async () => {
    const attempts: string[] = [];
    const client = createClient({
      baseUrl: "http://127.0.0.1:9",
      apiKey: "x.y.z",
      retry: { maxRetries: 2, baseDelayMs: 10 },
      fetch: (input, init) => {
        attempts.push(new Request(input, init).method);
        return fetch(input, init);
      },
    });
    await expect(client.sessions.poll()).rejects.toMatchObject({ code: "NETWORK_ERROR", status: 0 });
    expect(attempts).toEqual(["GET", "GET", "GET"]);
    attempts.length = 0;
    await expect(client.sessions.stop()).rejects.toMatchObject({ code: "NETWORK_ERROR" });
    expect(attempts).toEqual(["POST"]);
  });
});

describe("discovery and configuration", () => {
  test("when asked for the authorization server, then the SDK finds Keycloak's endpoints through the gateway", async () => {
    const server = await createClient({ baseUrl: platform.base }).authorizationServer();
    expect(server.issuer).toBe("http://127.0.0.1:8081/realms/cgs");
    expect(server.tokenEndpoint).toBe(`${server.issuer}/protocol/openid-connect/token`);
    expect(server.revocationEndpoint).toBe(`${server.issuer}/protocol/openid-connect/revoke`);
    expect(server.deviceAuthorizationEndpoint).toBe(`${server.issuer}/protocol/openid-connect/auth/device`);
  });

  test("when no base URL is given, then SERVICE_BASE_URL is used, else the production origin", () => {
    const saved = process.env.SERVICE_BASE_URL;
    try {
      process.env.SERVICE_BASE_URL = "https://staging.example.test/";
      expect(createClient().baseUrl).toBe("https://staging.example.test");
      delete process.env.SERVICE_BASE_URL;
      expect(createClient().baseUrl).toBe("https://play.example.com");
      expect(createClient({ baseUrl: "https://x.test" }).baseUrl).toBe("https://x.test");
    } finally {
      if (saved === undefined) delete process.env.SERVICE_BASE_URL;
      else process.env.SERVICE_BASE_URL = saved;
    }
  });
});
