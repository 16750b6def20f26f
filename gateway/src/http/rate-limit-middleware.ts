import type { Request, RequestHandler, Response } from "express";
import { MemoryStore, type Options, type Store } from "express-rate-limit";
import type { Logger } from "pino";
import { AppError, metrics, type RateLimitExtension } from "@cgs/shared";
import { FallbackStore } from "./fallback-rate-limit-store";
import { staticReplicaCount, type ReplicaCount } from "./replica-count";
import { RedisHitCounter, RedisRateLimitStore, type RedisCommandSender } from "./redis-rate-limit-store";

export type { RedisCommandSender } from "./redis-rate-limit-store";

export interface RateLimitSettings {
  windowMs: number;
  read: number;
  write: number;
  poll: number;
  webhook: number;
  resetEmail: number;
  resetEmailWindowMs: number;
  /** Gateway replicas serving now; while Redis fails each allows its 1/replicas share. Default 1. */
  replicas?: ReplicaCount;
  /** Max wait for one Redis command before the local counter answers instead, in ms. Default 250. */
  redisTimeoutMs?: number;
  /** How long to count locally after a Redis failure before trying Redis again, in ms. Default 1000. */
  redisRetryMs?: number;
}

export type BucketName = `${RateLimitExtension["bucket"]}:${RateLimitExtension["scope"]}` | "reset-email";

export interface RateLimiters {
  /** The limiter for an operation's x-rate-limit bucket and scope. */
  forBucket(bucket: RateLimitExtension): RequestHandler;
  /** Password-reset requests per e-mail address (reads the validated JSON body). */
  resetEmail: RequestHandler;
}

function secondsUntil(resetTime: Date | undefined, windowMs: number): number {
  if (!resetTime) return Math.ceil(windowMs / 1000);
  return Math.max(1, Math.ceil((resetTime.getTime() - Date.now()) / 1000));
}

/**
 * One limiter per bucket (express-rate-limit's stores and headers, a middleware of our own), each with its own
 * counter namespace (Redis prefix `cgs:rl:<bucket>:`), so read, write, poll and public buckets never share
 * counts. With Redis every gateway replica draws from the same budget; while Redis is down or hung each replica
 * counts on its own, each hit weighing as many as the replicas serving, from the count Redis last gave it (see
 * FallbackStore), and the shared budget resumes when Redis answers again. Without Redis counts are per process.
 */
export function createRateLimiters(
  settings: RateLimitSettings,
  redis?: RedisCommandSender,
  logger?: Logger,
): RateLimiters {
  const replicas = settings.replicas ?? staticReplicaCount(1);
  const redisTimeoutMs = settings.redisTimeoutMs ?? 250;
  // Every bucket's counters go to Redis together, one script call per event-loop turn.
  const counter = redis && new RedisHitCounter(redis, redisTimeoutMs);
  const storeFor = (name: BucketName, limit: number): FallbackStore | undefined => {
    if (!counter) return undefined;
    const shared = new RedisRateLimitStore(counter, `cgs:rl:${name}:`);
    return new FallbackStore(shared, {
      limit,
      replicas,
      retryAfterMs: settings.redisRetryMs ?? 1_000,
      onStateChange: (usingFallback, err) =>
        usingFallback
          ? logger?.warn({ bucket: name, err }, "redis unavailable; rate limits use this replica's share")
          : logger?.info({ bucket: name }, "redis is back; rate limits are shared again"),
    });
  };

  const build = (
    name: BucketName,
    limit: number,
    windowMs: number,
    key: (req: Request, res: Response) => string,
  ): RequestHandler => {
    const fallback = storeFor(name, limit);
    const store: Store = fallback ?? new MemoryStore();
    store.init?.({ windowMs } as Options);
    // express-rate-limit's contract (count, then X-RateLimit-* headers, then 429 past the limit) in one callback:
    // its own middleware awaited five steps a request, a few percent of the gateway's CPU.
    return (req, res, next) => {
      let counted: Promise<{ totalHits: number; resetTime?: Date }>;
      try {
        counted = Promise.resolve(store.increment(key(req, res)));
      } catch (err) {
        next(err);
        return;
      }
      counted
        .then(
          ({ totalHits, resetTime }) => {
            if (!res.headersSent) {
              // While Redis is out the counts are in hits × replicas: the headers show this replica's share.
              const cost = fallback?.usingFallback() ? fallback.localCost() : 1;
              res.setHeader("X-RateLimit-Limit", String(Math.max(1, Math.floor(limit / cost))));
              res.setHeader(
                "X-RateLimit-Remaining",
                String(Math.max(Math.floor((limit - totalHits) / cost), 0)),
              );
              if (resetTime)
                res.setHeader("X-RateLimit-Reset", String(Math.ceil(resetTime.getTime() / 1000)));
            }
            if (totalHits <= limit) {
              next();
              return;
            }
            metrics.rateLimitRejections.labels(name).inc();
            const wait = secondsUntil(resetTime, windowMs);
            next(AppError.rateLimited(wait, `Too many requests; retry in ${wait} seconds`));
          },
          // The fallback store already absorbs Redis failures; never fail a request because of a counter.
          (err: unknown) => {
            logger?.warn({ bucket: name, err }, "rate-limit counter failed; request allowed");
            next();
          },
        )
        .catch(next);
    };
  };

  const byAccount = (_req: Request, res: Response): string => {
    const principal = (res.locals as { principal?: { identityUserId: string } }).principal;
    if (!principal) throw new Error("account-scoped rate limit mounted before authentication");
    return principal.identityUserId;
  };
  const byIp = (req: Request): string => req.ip ?? req.socket.remoteAddress ?? "unknown";
  const limits: Record<RateLimitExtension["bucket"], number> = {
    read: settings.read,
    write: settings.write,
    poll: settings.poll,
    webhook: settings.webhook,
  };

  // By bucket, then scope: the API looks one up per request, without making a key.
  const byBucket = {} as Record<
    RateLimitExtension["bucket"],
    Record<RateLimitExtension["scope"], RequestHandler>
  >;
  for (const bucket of Object.keys(limits) as RateLimitExtension["bucket"][]) {
    const limiter = (scope: RateLimitExtension["scope"]) =>
      build(`${bucket}:${scope}`, limits[bucket], settings.windowMs, scope === "account" ? byAccount : byIp);
    byBucket[bucket] = { account: limiter("account"), ip: limiter("ip") };
  }
  const resetEmail = build("reset-email", settings.resetEmail, settings.resetEmailWindowMs, (req) => {
    const body = req.body as { email?: unknown } | undefined;
    return typeof body?.email === "string" ? body.email.trim().toLowerCase() : `ip:${byIp(req)}`;
  });

  return {
    forBucket: (bucket) => byBucket[bucket.bucket][bucket.scope],
    resetEmail,
  };
}
