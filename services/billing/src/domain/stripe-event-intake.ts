import type Stripe from "stripe";
import type { BillingDeps } from "./billing-deps";
import { reforecastAccount } from "./metering";
import { creditPaidCheckouts, type BatchOutcome } from "./paid-checkout-batch";
import {
  applyStripeEvent,
  isPaidCheckout,
  readPaidCheckout,
  type StripeEventOutcome,
  type WebhookPayments,
} from "./stripe-events";

export interface StripeEventIntakeOptions {
  /** Paid checkouts applied in one transaction at most. */
  maxBatch?: number;
  /**
   * Batch transactions under way at once: while one waits on the database the next is already filling, so
   * the process is not idle between round trips (they lock in the same order, so they never deadlock).
   */
  concurrentBatches?: number;
  /** Event ids this process saw committed, kept to answer redeliveries without the database. */
  recentIds?: number;
  /**
   * How long such an id answers from memory. Billing keeps stripe_events rows (they are never pruned), so any
   * age is safe; a day covers Stripe's quick retries and keeps the set small.
   */
  recentTtlMs?: number;
}

export interface StripeEventIntake {
  /** Applies a verified event once; resolves only after its outcome is committed. */
  apply(event: Stripe.Event): Promise<StripeEventOutcome>;
}

/** A bounded set of ids with an age limit: the oldest id goes first when it is full. */
function recentIdSet(capacity: number, ttlMs: number) {
  const addedAt = new Map<string, number>();
  return {
    has(id: string): boolean {
      const at = addedAt.get(id);
      return at !== undefined && performance.now() - at < ttlMs;
    },
    add(id: string): void {
      addedAt.delete(id);
      addedAt.set(id, performance.now());
      if (addedAt.size > capacity) addedAt.delete(addedAt.keys().next().value!);
    },
  };
}

interface Waiting {
  event: Stripe.Event;
  resolve(outcome: StripeEventOutcome): void;
  reject(err: unknown): void;
}

/**
 * The webhook's way into the use cases, a group commit: paid checkouts that arrive while a batch transaction
 * runs wait for the next one, which takes up to `maxBatch` of them and credits the common case set-based
 * (creditPaidCheckouts). Every other event, and every event of the batch that is not the common case, goes
 * through applyStripeEvent alone, as does every event of a batch whose transaction failed, so one bad event
 * cannot fail the others and a failure still reaches its own delivery (Stripe redelivers it). A redelivery
 * of an id this process saw committed is answered from memory; otherwise the database decides, across replicas.
 */
export function createStripeEventIntake(
  deps: BillingDeps,
  payments: WebhookPayments | undefined,
  options: StripeEventIntakeOptions = {},
): StripeEventIntake {
  const maxBatch = options.maxBatch ?? 64;
  const recent = recentIdSet(options.recentIds ?? 100_000, options.recentTtlMs ?? 24 * 3_600_000);
  const inFlight = new Map<string, Promise<StripeEventOutcome>>();
  const queue: Waiting[] = [];
  let running = 0;

  const alone = (w: Waiting) => applyStripeEvent(deps, w.event, payments).then(w.resolve, w.reject);

  async function runBatch(batch: Waiting[]): Promise<void> {
    let outcomes: Map<string, BatchOutcome>;
    try {
      outcomes = await creditPaidCheckouts(
        deps,
        batch.map((w) => w.event),
      );
    } catch (err) {
      deps.logger.warn(
        { err, events: batch.length },
        "stripe event batch failed: applying its events one by one",
      );
      outcomes = new Map();
    }
    for (const w of batch) {
      const outcome = outcomes.get(w.event.id);
      if (outcome === undefined || outcome === "per_event") void alone(w);
      else w.resolve(outcome);
    }
  }

  const concurrentBatches = options.concurrentBatches ?? 2;
  function startBatches(): void {
    while (running < concurrentBatches && queue.length > 0) {
      running += 1;
      void runBatch(queue.splice(0, maxBatch)).finally(() => {
        running -= 1;
        startBatches();
      });
    }
  }

  // A credit (a top-up, or a recharge: its intent's metadata names the account) that lands while a session is warned
  // about its credit's end clears (or moves) the warning now. After the commit, best effort: metering forecasts
  // again at the session's next minute anyway.
  const afterCredit = (event: Stripe.Event) => {
    const { accountId } = readPaidCheckout(event);
    if (!accountId) return;
    void reforecastAccount(deps, accountId).catch((err: unknown) =>
      deps.logger.warn({ err, accountId }, "could not forecast the credit again after a top-up"),
    );
  };

  const enqueue = (event: Stripe.Event) =>
    new Promise<StripeEventOutcome>((resolve, reject) => {
      queue.push({ event, resolve, reject });
      startBatches();
    });

  return {
    async apply(event) {
      if (recent.has(event.id)) return "duplicate_event";
      const running = inFlight.get(event.id);
      // The same event delivered twice at once: the second waits for the first and is its duplicate.
      if (running) return running.then((o) => (o === "ignored_type" ? o : "duplicate_event"));
      const work = isPaidCheckout(event) ? enqueue(event) : applyStripeEvent(deps, event, payments);
      inFlight.set(event.id, work);
      try {
        const outcome = await work;
        // Ignored types are not recorded in the database, so they are not remembered here either.
        if (outcome !== "ignored_type") recent.add(event.id);
        if (outcome === "credited") afterCredit(event);
        return outcome;
      } finally {
        inFlight.delete(event.id);
      }
    },
  };
}
