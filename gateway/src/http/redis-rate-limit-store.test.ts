import { randomUUID } from "node:crypto";
import { createClient } from "redis";
import { startOwnRedis, type OwnRedis } from "@cgs/shared/testing/own-redis";
import { RedisHitCounter, type RedisCommandSender } from "./redis-rate-limit-store";

// The rate-limit counters against a real redis-server of the test's own (it flushes scripts, which would disturb
// other tests on the shared peer). Every command goes to Redis; the sender only counts the calls it forwards.
jest.setTimeout(30_000);

let redis: OwnRedis;
const clients: ReturnType<typeof createClient>[] = [];

beforeAll(async () => {
  redis = await startOwnRedis();
});

afterAll(async () => {
  await Promise.all(clients.map((c) => c.quit()));
  await redis?.stop();
});

/** A separate connection, as each gateway replica has, counting the commands it sends. */
async function replica(): Promise<
  RedisCommandSender & { sent: string[][]; client: ReturnType<typeof createClient> }
> {
  const client = createClient({ url: redis.url });
  await client.connect();
  clients.push(client);
  const sent: string[][] = [];
  return {
    sent,
    client,
    sendCommand: (args) => {
      sent.push(args);
      return client.sendCommand(args);
    },
  };
}

describe("rate-limit counters in Redis", () => {
  it("when 50 hits on one key arrive in the same turn, then Redis gets one script call and the hits count 1 to 50 in arrival order", async () => {
    const sender = await replica();
    const counter = new RedisHitCounter(sender, 1_000);
    const key = `rl:${randomUUID()}`;
    const counts = await Promise.all(Array.from({ length: 50 }, () => counter.increment(key, 60_000)));
    expect(counts.map((c) => c.totalHits)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    expect(counts.every((c) => c.msToReset > 59_000 && c.msToReset <= 60_000)).toBe(true);
    expect(sender.sent.filter(([name]) => name === "EVALSHA")).toHaveLength(1);
    expect(await sender.client.get(key)).toBe("50");
  });

  it("when two replicas add hits to the same keys in the same turn, then every hit gets its own count and none is lost", async () => {
    const [a, b] = [new RedisHitCounter(await replica(), 1_000), new RedisHitCounter(await replica(), 1_000)];
    const keys = [`rl:${randomUUID()}`, `rl:${randomUUID()}`];
    const hits = Array.from({ length: 40 }, (_, i) =>
      (i % 2 ? a : b).increment(keys[i % 3 ? 0 : 1]!, 60_000),
    );
    const counts = await Promise.all(hits);
    for (const k of keys.keys()) {
      const mine = counts.filter((_, i) => (i % 3 ? 0 : 1) === k).map((c) => c.totalHits);
      expect([...mine].sort((x, y) => x - y)).toEqual(Array.from({ length: mine.length }, (_, i) => i + 1));
    }
    // Later turns continue from the shared total.
    expect((await a.increment(keys[0]!, 60_000)).totalHits).toBe(27);
  });

  it("when a key's window ends, then its count starts again at 1 with a new window", async () => {
    const counter = new RedisHitCounter(await replica(), 1_000);
    const key = `rl:${randomUUID()}`;
    await Promise.all([counter.increment(key, 200), counter.increment(key, 200)]);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const after = await counter.increment(key, 200);
    expect(after.totalHits).toBe(1);
    expect(after.msToReset).toBeGreaterThan(100);
  });

  it("when Redis has lost the script (restart or SCRIPT FLUSH), then the next hit loads it again and counts on", async () => {
    const sender = await replica();
    const counter = new RedisHitCounter(sender, 1_000);
    const key = `rl:${randomUUID()}`;
    expect((await counter.increment(key, 60_000)).totalHits).toBe(1);
    await sender.client.sendCommand(["SCRIPT", "FLUSH"]);
    expect((await counter.increment(key, 60_000)).totalHits).toBe(2);
    expect(sender.sent.filter(([name, sub]) => name === "SCRIPT" && sub === "LOAD")).toHaveLength(2);
  });

  it("when the Redis client throws instead of answering, then the turn's hits fail and the next turn counts again", async () => {
    // A client that throws synchronously (a fault real Redis cannot produce): the sender stands in for it.
    const sender = await replica();
    let broken = false;
    const counter = new RedisHitCounter(
      {
        sendCommand: (args) => {
          if (broken) throw new Error("client torn down");
          return sender.sendCommand(args);
        },
      },
      300,
    );
    const key = `rl:${randomUUID()}`;
    expect((await counter.increment(key, 60_000)).totalHits).toBe(1);
    broken = true;
    await expect(counter.increment(key, 60_000)).rejects.toThrow("client torn down");
    broken = false;
    await expect(counter.increment(key, 60_000)).resolves.toMatchObject({ totalHits: 2 });
  });

  it("when Redis hangs, then the turn's hits fail within the timeout and a later turn counts again once it is back", async () => {
    const sender = await replica();
    const counter = new RedisHitCounter(sender, 300);
    const key = `rl:${randomUUID()}`;
    expect((await counter.increment(key, 60_000)).totalHits).toBe(1);
    redis.hang();
    try {
      const started = Date.now();
      const failed = await Promise.allSettled([
        counter.increment(key, 60_000),
        counter.increment(key, 60_000),
      ]);
      expect(failed.map((r) => r.status)).toEqual(["rejected", "rejected"]);
      expect(String((failed[0] as PromiseRejectedResult).reason)).toMatch(/timed out after 300 ms/);
      expect(Date.now() - started).toBeLessThan(1_000);
    } finally {
      redis.resume();
    }
    // The hung turn's script ran when Redis woke: those two hits were counted too, as a late reply would have.
    await expect(counter.increment(key, 60_000)).resolves.toMatchObject({ totalHits: 4 });
  });
});
