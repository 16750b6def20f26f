import type { Request, RequestHandler, Response } from "express";
import { rateLimit, type Store } from "express-rate-limit";
import type { Logger } from "pino";
import { AppError, metrics, type RateLimitExtension } from "@cgs/shared";
import { FallbackStore } from "./fallback-rate-limit-store";
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
  /** Gateway replicas sharing the Redis budget; while Redis fails each allows its 1/replicas share. Default 1. */
  replicas?: number;
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
 * One express-rate-limit instance per bucket, each with its own counter namespace (Redis prefix
 * `cgs:rl:<bucket>:`), so read, write, poll and public buckets never share counts. With Redis every
 * gateway replica draws from the same budget; while Redis is down or hung each replica counts on its own
 * against limit/replicas, and the shared budget resumes when Redis answers again. Without Redis counts
 * are per process.
 */
export function createRateLimiters(
  settings: RateLimitSettings,
  redis?: RedisCommandSender,
  logger?: Logger,
): RateLimiters {
  const replicas = Math.max(1, settings.replicas ?? 1);
  const redisTimeoutMs = settings.redisTimeoutMs ?? 250;
  // Every bucket's counters go to Redis together, one script call per event-loop turn.
  const counter = redis && new RedisHitCounter(redis, redisTimeoutMs);
  const storeFor = (name: BucketName): FallbackStore | undefined => {
    if (!counter) return undefined;
    const shared = new RedisRateLimitStore(counter, `cgs:rl:${name}:`);
    return new FallbackStore(shared, {
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
    const store = storeFor(name);
    const replicaShare = Math.max(1, Math.floor(limit / replicas));
    return rateLimit({
      windowMs,
      limit: () => (store?.usingFallback() ? replicaShare : limit),
      legacyHeaders: true,
      standardHeaders: false,
      store: store as Store | undefined,
      keyGenerator: key,
      // The fallback store already absorbs Redis failures; never fail a request because of a counter.
      passOnStoreError: true,
      validate: { creationStack: false },
      handler: (req, _res, next) => {
        metrics.rateLimitRejections.labels(name).inc();
        const info = (req as Request & { rateLimit?: { resetTime?: Date } }).rateLimit;
        const wait = secondsUntil(info?.resetTime, windowMs);
        next(AppError.rateLimited(wait, `Too many requests; retry in ${wait} seconds`));
      },
    });
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

  const cache = new Map<BucketName, RequestHandler>();
  for (const bucket of Object.keys(limits) as RateLimitExtension["bucket"][]) {
    for (const scope of ["account", "ip"] as const) {
      const name: BucketName = `${bucket}:${scope}`;
      cache.set(name, build(name, limits[bucket], settings.windowMs, scope === "account" ? byAccount : byIp));
    }
  }
  const resetEmail = build("reset-email", settings.resetEmail, settings.resetEmailWindowMs, (req) => {
    const body = req.body as { email?: unknown } | undefined;
    return typeof body?.email === "string" ? body.email.trim().toLowerCase() : `ip:${byIp(req)}`;
  });

  return {
    forBucket: (bucket) => cache.get(`${bucket.bucket}:${bucket.scope}`)!,
    resetEmail,
  };
}
