import type { ClientRateLimitInfo, Options, Store } from "express-rate-limit";
import type { ReplicaCount } from "./replica-count";

export interface FallbackStoreOptions {
  /** The bucket's limit per window, across all replicas. */
  limit: number;
  /** How long to count locally after a shared-store failure before trying the shared store again, in ms. */
  retryAfterMs: number;
  /** The gateway replicas serving now: while the shared store fails, each allows its share. */
  replicas: ReplicaCount;
  /** Called once when the shared store fails and once when it answers again. */
  onStateChange?: (usingFallback: boolean, err?: unknown) => void;
}

interface Window {
  count: number;
  resetAt: number;
}

/** Keys whose window ended are dropped from the memory of shared counts every this many requests. */
const PRUNE_EVERY = 4_096;

/**
 * The shared (Redis) counter, with this replica's own counter standing in while Redis fails or hangs: the API
 * keeps serving and limits keep holding. Locally every hit counts as one per replica serving (`replicas`, at most
 * the limit), so the replicas together admit the limit, not the limit times their number; and a key continues
 * from the count Redis last gave this replica for its window, instead of restarting at zero. After retryAfterMs
 * the next request tries Redis again, so the shared budget resumes.
 */
export class FallbackStore implements Store {
  /** Per key, the shared count at Redis's last answer here and when that window ends. */
  private readonly lastShared = new Map<string, Window>();
  /** Per key, this replica's count while Redis is out, in hits × replicas. */
  private readonly local = new Map<string, Window>();
  private windowMs = 60_000;
  private failedAt: number | undefined;
  private counted = 0;

  constructor(
    private readonly shared: Store,
    private readonly options: FallbackStoreOptions,
  ) {}

  get prefix(): string | undefined {
    return this.shared.prefix;
  }

  /** True while counts are this replica's own. */
  usingFallback(): boolean {
    return this.failedAt !== undefined;
  }

  /** What one local hit counts for: the replicas serving, at most the limit (each allows at least one a window). */
  localCost(): number {
    return Math.min(this.options.replicas.current(), this.options.limit);
  }

  init(options: Options): void {
    this.shared.init?.(options);
    this.windowMs = options.windowMs;
  }

  increment(key: string): Promise<ClientRateLimitInfo> {
    if (this.failedAt !== undefined && Date.now() - this.failedAt < this.options.retryAfterMs) {
      return Promise.resolve(this.countLocally(key));
    }
    // A promise chain rather than an async function: every API request comes through here.
    let shared: Promise<ClientRateLimitInfo>;
    try {
      shared = Promise.resolve(this.shared.increment(key));
    } catch (err) {
      shared = Promise.reject(err as Error);
    }
    return shared.then(
      (result) => {
        if (this.failedAt !== undefined) {
          this.failedAt = undefined;
          this.local.clear();
          this.options.onStateChange?.(false);
        }
        this.remember(key, result);
        return result;
      },
      (err: unknown) => {
        if (this.failedAt === undefined) this.options.onStateChange?.(true, err);
        this.failedAt = Date.now();
        return this.countLocally(key);
      },
    );
  }

  private remember(key: string, { totalHits, resetTime }: ClientRateLimitInfo): void {
    const resetAt = resetTime ? resetTime.getTime() : Date.now() + this.windowMs;
    const known = this.lastShared.get(key);
    if (known) {
      known.count = totalHits;
      known.resetAt = resetAt;
    } else {
      this.lastShared.set(key, { count: totalHits, resetAt });
    }
    this.pruneNowAndThen();
  }

  /** Forgets keys whose window has ended, every PRUNE_EVERY counts: the maps stay as large as the live keys. */
  private pruneNowAndThen(): void {
    if (++this.counted % PRUNE_EVERY !== 0) return;
    const now = Date.now();
    for (const map of [this.lastShared, this.local]) {
      for (const [key, window] of map) if (window.resetAt <= now) map.delete(key);
    }
  }

  private countLocally(key: string): ClientRateLimitInfo {
    const now = Date.now();
    let window = this.local.get(key);
    if (!window || window.resetAt <= now) {
      const carried = this.lastShared.get(key);
      window =
        carried && carried.resetAt > now
          ? { count: carried.count, resetAt: carried.resetAt }
          : { count: 0, resetAt: now + this.windowMs };
      this.local.set(key, window);
    }
    window.count += this.localCost();
    this.pruneNowAndThen();
    return { totalHits: window.count, resetTime: new Date(window.resetAt) };
  }

  async decrement(key: string): Promise<void> {
    if (this.usingFallback()) {
      const window = this.local.get(key);
      if (window) window.count = Math.max(0, window.count - this.localCost());
      return;
    }
    await Promise.resolve(this.shared.decrement(key)).catch(() => undefined);
  }

  async resetKey(key: string): Promise<void> {
    this.local.delete(key);
    this.lastShared.delete(key);
    await Promise.resolve(this.shared.resetKey(key)).catch(() => undefined);
  }
}
