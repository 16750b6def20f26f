import { MemoryStore, type ClientRateLimitInfo, type Options, type Store } from "express-rate-limit";

export interface FallbackStoreOptions {
  /** How long to count locally after a shared-store failure before trying the shared store again, in ms. */
  retryAfterMs: number;
  /** Called once when the shared store fails and once when it answers again. */
  onStateChange?: (usingFallback: boolean, err?: unknown) => void;
}

/**
 * The shared (Redis) counter, with this replica's own in-memory counter standing in while Redis fails or
 * hangs: the API keeps serving and limits keep holding (at the per-replica share the limiter asks for through
 * usingFallback()). After retryAfterMs the next request tries Redis again, so the shared budget resumes.
 */
export class FallbackStore implements Store {
  private readonly local = new MemoryStore();
  private failedAt: number | undefined;

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

  init(options: Options): void {
    this.shared.init?.(options);
    this.local.init(options);
  }

  increment(key: string): Promise<ClientRateLimitInfo> {
    if (this.failedAt !== undefined && Date.now() - this.failedAt < this.options.retryAfterMs) {
      return this.local.increment(key);
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
          this.options.onStateChange?.(false);
        }
        return result;
      },
      (err: unknown) => {
        if (this.failedAt === undefined) this.options.onStateChange?.(true, err);
        this.failedAt = Date.now();
        return this.local.increment(key);
      },
    );
  }

  async decrement(key: string): Promise<void> {
    if (this.usingFallback()) return this.local.decrement(key);
    await Promise.resolve(this.shared.decrement(key)).catch(() => undefined);
  }

  async resetKey(key: string): Promise<void> {
    await Promise.all([
      this.local.resetKey(key),
      Promise.resolve(this.shared.resetKey(key)).catch(() => undefined),
    ]);
  }
}
