import type { Request, RequestHandler, Response } from "express";
import { rateLimit, type Store } from "express-rate-limit";
import { RedisStore } from "rate-limit-redis";
import { AppError, metrics, type RateLimitExtension } from "@cgs/shared";

/** The one thing the limiter needs from a Redis client (node-redis: `(args) => client.sendCommand(args)`). */
export interface RedisCommandSender {
  sendCommand(args: string[]): Promise<unknown>;
}

export interface RateLimitSettings {
  windowMs: number;
  read: number;
  write: number;
  poll: number;
  webhook: number;
  resetEmail: number;
  resetEmailWindowMs: number;
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
 * gateway replica draws from the same budget; without it counts are per process.
 */
export function createRateLimiters(settings: RateLimitSettings, redis?: RedisCommandSender): RateLimiters {
  const storeFor = (name: BucketName): Store | undefined =>
    redis
      ? new RedisStore({
          prefix: `cgs:rl:${name}:`,
          sendCommand: (...args: string[]) => redis.sendCommand(args) as Promise<string | number>,
        })
      : undefined;

  const build = (
    name: BucketName,
    limit: number,
    windowMs: number,
    key: (req: Request, res: Response) => string,
  ): RequestHandler =>
    rateLimit({
      windowMs,
      limit,
      legacyHeaders: true,
      standardHeaders: false,
      store: storeFor(name),
      keyGenerator: key,
      // A Redis outage should not take the API down with it: count nothing rather than fail the request.
      passOnStoreError: true,
      validate: { creationStack: false },
      handler: (req, _res, next) => {
        metrics.rateLimitRejections.labels(name).inc();
        const info = (req as Request & { rateLimit?: { resetTime?: Date } }).rateLimit;
        const wait = secondsUntil(info?.resetTime, windowMs);
        next(AppError.rateLimited(wait, `Too many requests; retry in ${wait} seconds`));
      },
    });

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
