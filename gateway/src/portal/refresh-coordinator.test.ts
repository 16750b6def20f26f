import { randomUUID } from "node:crypto";
import pino from "pino";
import { createClient } from "redis";
import { RefreshRejectedError, type OidcTokens } from "./oidc-login";
import { createRedisRefreshCoordinator, RefreshReplayRefused } from "./refresh-coordinator";

const logger = pino({ level: "silent" });
const SECRET = "refresh-coordinator-test-secret-0123456789";
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("refresh coordinator on the real Redis", () => {
  const redis = createClient({ url: process.env.REDIS_URL || "redis://127.0.0.1:6379" });
  const sender = { sendCommand: (args: string[]) => redis.sendCommand(args) };
  beforeAll(() => redis.connect());
  afterAll(() => redis.quit());

  it("when two replicas refresh the same token at once, then the token endpoint is called once and all callers get its tokens", async () => {
    const replicas = [1, 2].map(() =>
      createRedisRefreshCoordinator({ redis: sender, secret: SECRET, logger }),
    );
    const token = `rt-${randomUUID()}`;
    let calls = 0;
    const refresh = async (): Promise<OidcTokens> => {
      calls += 1;
      await sleep(200);
      return { accessToken: `at-${calls}`, refreshToken: `rt-next-${calls}`, refreshExpiresIn: 60 };
    };
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) => replicas[i % 2]!.run(token, "browser-1", refresh)),
    );
    expect(calls).toBe(1);
    expect(new Set(results.map((r) => r.accessToken))).toEqual(new Set(["at-1"]));
    // What Redis holds is sealed: neither token appears in clear.
    const keys = await redis.keys(`cgs:portal-refresh:*`);
    const stored = await Promise.all(keys.map((k) => redis.get(k)));
    expect(stored.join(" ")).not.toContain("rt-next-1");
  });

  it("when another client presents a refresh token another replica already used, then it gets no tokens and the endpoint is not called", async () => {
    const [a, b] = [1, 2].map(() => createRedisRefreshCoordinator({ redis: sender, secret: SECRET, logger }));
    const token = `rt-${randomUUID()}`;
    let calls = 0;
    const refresh = async (): Promise<OidcTokens> => {
      calls += 1;
      await sleep(100);
      return { accessToken: "at-1", refreshToken: "rt-next-1" };
    };
    const [mine, elsewhere] = await Promise.allSettled([
      a!.run(token, "browser-1", refresh),
      sleep(20).then(() => b!.run(token, "browser-2", refresh)),
    ]);
    expect(mine).toMatchObject({ status: "fulfilled", value: { accessToken: "at-1" } });
    expect(elsewhere.status).toBe("rejected");
    expect((elsewhere as PromiseRejectedResult).reason).toBeInstanceOf(RefreshReplayRefused);
    // The refreshing browser's own late request still gets them, on either replica.
    await expect(b!.run(token, "browser-1", refresh)).resolves.toMatchObject({ accessToken: "at-1" });
    expect(calls).toBe(1);
  });

  it("when the identity provider refuses the token, then every replica sees the refusal without calling it again", async () => {
    const [a, b] = [1, 2].map(() => createRedisRefreshCoordinator({ redis: sender, secret: SECRET, logger }));
    const token = `rt-${randomUUID()}`;
    let calls = 0;
    const refuse = async (): Promise<OidcTokens> => {
      calls += 1;
      await sleep(100);
      throw new RefreshRejectedError("Token is not active");
    };
    const outcomes = await Promise.allSettled([
      a!.run(token, "browser-1", refuse),
      b!.run(token, "browser-1", refuse),
    ]);
    expect(calls).toBe(1);
    for (const o of outcomes) {
      expect(o.status).toBe("rejected");
      expect((o as PromiseRejectedResult).reason).toBeInstanceOf(RefreshRejectedError);
    }
  });

  it("when the identity provider cannot be reached, then the lock is freed so the next request tries again", async () => {
    const coordinator = createRedisRefreshCoordinator({ redis: sender, secret: SECRET, logger });
    const token = `rt-${randomUUID()}`;
    await expect(
      coordinator.run(token, "browser-1", () => Promise.reject(new Error("connect ECONNREFUSED"))),
    ).rejects.toThrow("ECONNREFUSED");
    const tokens = await coordinator.run(token, "browser-1", async () => ({ accessToken: "at-retry" }));
    expect(tokens.accessToken).toBe("at-retry");
  });
});

describe("refresh coordinator when Redis hangs", () => {
  // A Redis that accepts a command and never answers cannot be produced by the shared peer without stopping it
  // for everyone, so this sender stands in for a hung one.
  const hung = { sendCommand: () => new Promise<never>(() => undefined) };

  it("when Redis does not answer, then the refresh runs here after the short command timeout", async () => {
    const coordinator = createRedisRefreshCoordinator({
      redis: hung,
      secret: SECRET,
      logger,
      commandTimeoutMs: 100,
    });
    const started = Date.now();
    const tokens = await coordinator.run("rt-hung", "browser-1", async () => ({ accessToken: "at-local" }));
    expect(tokens.accessToken).toBe("at-local");
    expect(Date.now() - started).toBeLessThan(1_000);
  });
});
