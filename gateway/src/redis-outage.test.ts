import { randomUUID } from "node:crypto";
import { createClient } from "redis";
import { startOwnRedis, type OwnRedis } from "@cgs/shared/testing/own-redis";
import { startTestIdentityProvider, type TestIdentityProvider } from "@cgs/shared/testing/tokens";
import { startTestGateway, type TestGateway } from "../../test/harnesses/gateway-harness";

// Fault: Redis (the shared rate-limit counters) hung, then down, then back. The test runs its own
// redis-server so it can SIGSTOP and kill it; the shared peer on 6379 is never touched.
jest.setTimeout(60_000);

let idp: TestIdentityProvider;
let redis: OwnRedis;
let client: ReturnType<typeof createClient>;
let gw: TestGateway;

beforeAll(async () => {
  idp = await startTestIdentityProvider();
  redis = await startOwnRedis();
  client = createClient({
    url: redis.url,
    disableOfflineQueue: true,
    socket: { connectTimeout: 1_000, reconnectStrategy: () => 100 },
  });
  client.on("error", () => undefined);
  await client.connect();
  gw = await startTestGateway(idp, {
    redis: { sendCommand: (args) => client.sendCommand(args) },
    // Two replicas share the budget: while Redis is out each allows half.
    env: { GATEWAY_REPLICAS: "2", REDIS_COMMAND_TIMEOUT_MS: "200", RATE_LIMIT_RESET_EMAIL: "4" },
  });
});

afterAll(async () => {
  await gw?.close();
  await client?.disconnect().catch(() => undefined);
  await redis?.stop();
  await idp?.close();
});

async function write(token: string) {
  const started = Date.now();
  const res = await fetch(`${gw.url}/api/v1/sessions/vpn-key`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}` },
  });
  await res.arrayBuffer();
  return {
    status: res.status,
    limit: res.headers.get("x-ratelimit-limit"),
    remaining: res.headers.get("x-ratelimit-remaining"),
    ms: Date.now() - started,
  };
}

async function resetRequest(email: string) {
  const res = await fetch(`${gw.url}/api/v1/auth/password-reset/request`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ email }),
  });
  await res.arrayBuffer();
  return res.status;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("fault: Redis hung or down", () => {
  it("when Redis hangs, then requests are answered within the command timeout against this replica's share, and the shared budget resumes after", async () => {
    const token = await idp.sign({ sub: `redis-hung-${randomUUID()}` });
    expect(await write(token)).toMatchObject({ status: 200, limit: "20", remaining: "19" });

    redis.hang();
    try {
      const during = [];
      for (let i = 0; i < 10; i++) during.push(await write(token));
      // This replica continues from Redis's last count (1), each hit weighing two (the two replicas): 9 more fit
      // in the limit of 20, not a fresh half of it.
      expect(during.slice(0, 9).map((r) => [r.status, r.limit])).toEqual(Array(9).fill([200, "10"]));
      expect(during.slice(0, 9).map((r) => r.remaining)).toEqual([
        "8",
        "7",
        "6",
        "5",
        "4",
        "3",
        "2",
        "1",
        "0",
      ]);
      expect(during[9]!.status).toBe(429);
      // Only the request that met the hang waits for the timeout; the rest skip Redis entirely.
      expect(Math.max(...during.map((r) => r.ms))).toBeLessThan(1_500);
      const ready = await fetch(`${gw.url}/readyz`);
      expect(ready.status).toBe(200);
    } finally {
      redis.resume();
    }

    await sleep(1_200);
    // Redis kept its count through the hang (1, plus the increment that timed out and landed on waking):
    // the shared budget carries on from there.
    expect(await write(token)).toMatchObject({ status: 200, limit: "20", remaining: "17" });
  });

  it("when Redis is killed, then the API keeps serving with per-replica limits (the per-e-mail reset limit included), and when it returns the shared budget resumes", async () => {
    const token = await idp.sign({ sub: `redis-down-${randomUUID()}` });
    const email = `fault-${randomUUID()}@example.com`;
    await redis.kill();
    try {
      const first = await write(token);
      expect(first).toMatchObject({ status: 200, limit: "10", remaining: "9" });
      expect(first.ms).toBeLessThan(1_000);
      // RATE_LIMIT_RESET_EMAIL 4 across two replicas: this replica alone allows 2 for the address.
      expect([await resetRequest(email), await resetRequest(email), await resetRequest(email)]).toEqual([
        200, 200, 429,
      ]);
      expect((await fetch(`${gw.url}/readyz`)).status).toBe(200);
    } finally {
      await redis.restart();
    }

    const deadline = Date.now() + 10_000;
    let after = await write(token);
    while (after.limit !== "20" && Date.now() < deadline) {
      await sleep(300);
      after = await write(token);
    }
    // A fresh Redis: the shared count starts over for this account.
    expect(after).toMatchObject({ status: 200, limit: "20", remaining: "19" });
  });
});
