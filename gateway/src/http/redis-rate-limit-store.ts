import type { ClientRateLimitInfo, Options, Store } from "express-rate-limit";

/** The one thing the limiter needs from a Redis client (node-redis: `(args) => client.sendCommand(args)`). */
export interface RedisCommandSender {
  sendCommand(args: string[]): Promise<unknown>;
}

/**
 * Adds each key's hits (ARGV[2i-1]) and returns, per key, the new total and the milliseconds until its window ends.
 * A key without a live window (missing, or left without expiry) starts one of ARGV[2i] ms, as rate-limit-redis did.
 */
const INCREMENT_SCRIPT = `
local out = {}
for i, key in ipairs(KEYS) do
  local hits = tonumber(ARGV[2 * i - 1])
  local windowMs = tonumber(ARGV[2 * i])
  local ttl = redis.call("PTTL", key)
  local total = hits
  if ttl <= 0 then
    redis.call("SET", key, hits, "PX", windowMs)
    ttl = windowMs
  else
    total = redis.call("INCRBY", key, hits)
  end
  out[2 * i - 1] = total
  out[2 * i] = ttl
end
return out`.trim();

/** Keys in one script call at most, so one turn's batch never holds Redis for long. */
const MAX_KEYS_PER_CALL = 256;

interface Waiter {
  resolve: (count: { totalHits: number; msToReset: number }) => void;
  reject: (err: unknown) => void;
}

interface PendingKey {
  windowMs: number;
  waiters: Waiter[];
}

class RedisTimeout extends Error {}

/** promise, or a RedisTimeout rejection after ms. One promise and one timer (the limiter makes one a turn). */
export function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new RedisTimeout(`redis command timed out after ${ms} ms`)), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}

function rejectAll(slice: [string, PendingKey][], err: unknown): void {
  for (const [, entry] of slice) for (const waiter of entry.waiters) waiter.reject(err);
}

const isNoScript = (err: unknown): boolean => err instanceof Error && err.message.startsWith("NOSCRIPT");

/**
 * Rate-limit counters in Redis, every bucket's, with one round trip per event-loop turn: the hits that arrive in a
 * turn are added per key in one script call, and each request gets the count it would have had alone (the first
 * of n hits on a key sees total − n + 1). So a busy account costs Redis one command a turn, not one a request, and
 * the limit stays exact across replicas. Each call waits at most timeoutMs; on a failure every request of that
 * turn gets the error (FallbackStore then counts it locally).
 */
export class RedisHitCounter {
  private pending = new Map<string, PendingKey>();
  private scheduled = false;
  private sha: Promise<string> | undefined;
  /** What sha resolved to, once it has. */
  private loadedSha: string | undefined;

  constructor(
    private readonly redis: RedisCommandSender,
    private readonly timeoutMs: number,
  ) {}

  /** Adds one hit to key, whose window (when it starts one) lasts windowMs. */
  increment(key: string, windowMs: number): Promise<{ totalHits: number; msToReset: number }> {
    return new Promise((resolve, reject) => {
      let entry = this.pending.get(key);
      if (!entry) {
        entry = { windowMs, waiters: [] };
        this.pending.set(key, entry);
      }
      entry.waiters.push({ resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  /** One plain command (DECR, DEL) under the same timeout. */
  command(args: string[]): Promise<unknown> {
    return withTimeout(this.redis.sendCommand(args), this.timeoutMs);
  }

  private flush(): void {
    this.scheduled = false;
    const batch = [...this.pending];
    this.pending = new Map();
    for (let start = 0; start < batch.length; start += MAX_KEYS_PER_CALL) {
      const slice = batch.slice(start, start + MAX_KEYS_PER_CALL);
      const args: string[] = [];
      for (const [, entry] of slice) args.push(String(entry.waiters.length), String(entry.windowMs));
      withTimeout(
        this.evaluate(
          slice.map(([key]) => key),
          args,
        ),
        this.timeoutMs,
      ).then(
        (reply) => this.settle(slice, reply),
        (err: unknown) => rejectAll(slice, err),
      );
    }
  }

  private settle(slice: [string, PendingKey][], reply: unknown): void {
    if (!Array.isArray(reply) || reply.length !== slice.length * 2) {
      rejectAll(slice, new TypeError("unexpected reply from the rate-limit script"));
      return;
    }
    slice.forEach(([, entry], i) => {
      const total = Number(reply[2 * i]);
      const msToReset = Number(reply[2 * i + 1]);
      const before = total - entry.waiters.length;
      entry.waiters.forEach((waiter, j) => waiter.resolve({ totalHits: before + j + 1, msToReset }));
    });
  }

  private evaluate(keys: string[], args: string[]): Promise<unknown> {
    const call = (sha: string) =>
      this.redis.sendCommand(["EVALSHA", sha, String(keys.length), ...keys, ...args]);
    // Once the script is loaded (every turn but the first), the call goes straight out. A sender that throws
    // instead of rejecting fails this turn's hits like any Redis error (never the setImmediate that flushes them).
    let first: Promise<unknown>;
    try {
      first = this.loadedSha === undefined ? this.scriptSha().then(call) : call(this.loadedSha);
    } catch (err) {
      first = Promise.reject(err as Error);
    }
    return first.catch((err: unknown) => {
      // Redis restarted or flushed its scripts: load it again once.
      if (!isNoScript(err)) throw err;
      this.sha = undefined;
      this.loadedSha = undefined;
      return this.scriptSha().then(call);
    });
  }

  private scriptSha(): Promise<string> {
    if (this.sha) return this.sha;
    const loading = this.redis.sendCommand(["SCRIPT", "LOAD", INCREMENT_SCRIPT]).then((sha) => {
      if (typeof sha !== "string") throw new TypeError("unexpected reply to SCRIPT LOAD");
      if (this.sha === loading) this.loadedSha = sha;
      return sha;
    });
    // A failed load is retried by the next turn, not remembered.
    loading.catch(() => {
      if (this.sha === loading) this.sha = undefined;
    });
    this.sha = loading;
    return loading;
  }
}

/** One bucket's counters (keys under prefix) in the shared RedisHitCounter, as an express-rate-limit store. */
export class RedisRateLimitStore implements Store {
  private windowMs = 60_000;

  constructor(
    private readonly counter: RedisHitCounter,
    readonly prefix: string,
  ) {}

  init(options: Options): void {
    this.windowMs = options.windowMs;
  }

  increment(key: string): Promise<ClientRateLimitInfo> {
    return this.counter
      .increment(this.prefix + key, this.windowMs)
      .then(({ totalHits, msToReset }) => ({ totalHits, resetTime: new Date(Date.now() + msToReset) }));
  }

  async decrement(key: string): Promise<void> {
    await this.counter.command(["DECR", this.prefix + key]);
  }

  async resetKey(key: string): Promise<void> {
    await this.counter.command(["DEL", this.prefix + key]);
  }
}
