import { randomUUID } from "node:crypto";
import { and, asc, desc, eq, gte, inArray, or, sql } from "drizzle-orm";
import type { SqlExecutor } from "@cgs/shared";
import { disputesTable, paymentReviewsTable, stripeEventsTable, topupsTable } from "./billing-tables";
import {
  executePrepared,
  idList,
  insertLedgerLinesStatement,
  moveWalletsStatement,
  recordset,
  type BillingTransaction,
  type LedgerLine,
  type WalletMove,
  type WalletRow,
} from "./wallet-repository";

export type TopupRow = typeof topupsTable.$inferSelect;
export type DisputeRow = typeof disputesTable.$inferSelect;

/** Records a Stripe event id; false when it was already recorded (a redelivery). */
export async function recordStripeEvent(
  tx: BillingTransaction,
  eventId: string,
  type: string,
): Promise<boolean> {
  const seen = await tx
    .insert(stripeEventsTable)
    .values({ eventId, type, outcome: "pending" })
    .onConflictDoNothing()
    .returning({ eventId: stripeEventsTable.eventId });
  return seen.length > 0;
}

/** True when the event id was already recorded: a redelivery answered with one read and no transaction. */
/** The recorded outcome of an event id, or undefined when it was never recorded. */
export async function stripeEventOutcome(
  executor: SqlExecutor,
  eventId: string,
): Promise<string | undefined> {
  const rows = await executor
    .select({ outcome: stripeEventsTable.outcome })
    .from(stripeEventsTable)
    .where(eq(stripeEventsTable.eventId, eventId));
  return rows[0]?.outcome;
}

/** Of these recorded event ids, the ones whose closed-wallet refund is still to be finished. */
export async function refundPendingEvents(executor: SqlExecutor, eventIds: string[]): Promise<Set<string>> {
  if (eventIds.length === 0) return new Set();
  const rows = await executor
    .select({ eventId: stripeEventsTable.eventId })
    .from(stripeEventsTable)
    .where(
      and(inArray(stripeEventsTable.eventId, eventIds), eq(stripeEventsTable.outcome, "refund_pending")),
    );
  return new Set(rows.map((r) => r.eventId));
}

export async function setStripeEventOutcome(tx: BillingTransaction, eventId: string, outcome: string) {
  await tx.update(stripeEventsTable).set({ outcome }).where(eq(stripeEventsTable.eventId, eventId));
}

export type NewTopup = typeof topupsTable.$inferInsert;

export async function insertTopup(executor: SqlExecutor, topup: NewTopup): Promise<void> {
  await executor.insert(topupsTable).values(topup);
}

/** Inserts a top-up; undefined when one with the same (account, Idempotency-Key) exists. */
export async function insertTopupOnce(
  tx: BillingTransaction,
  topup: NewTopup,
): Promise<TopupRow | undefined> {
  const rows = await tx.insert(topupsTable).values(topup).onConflictDoNothing().returning();
  return rows[0];
}

export async function findTopupByClientKey(
  executor: SqlExecutor,
  accountId: string,
  clientKey: string,
): Promise<TopupRow | undefined> {
  const rows = await executor
    .select()
    .from(topupsTable)
    .where(and(eq(topupsTable.accountId, accountId), eq(topupsTable.clientKey, clientKey)));
  return rows[0];
}

export async function findTopup(executor: SqlExecutor, id: string): Promise<TopupRow | undefined> {
  const rows = await executor.select().from(topupsTable).where(eq(topupsTable.id, id));
  return rows[0];
}

export async function findLatestTopupOfCheckout(
  executor: SqlExecutor,
  checkoutSessionId: string,
): Promise<TopupRow | undefined> {
  const rows = await executor
    .select()
    .from(topupsTable)
    .where(eq(topupsTable.checkoutSessionId, checkoutSessionId));
  return rows[rows.length - 1];
}

/** Stores the provider's checkout on a top-up still being created; false when another request stored one first. */
export async function storeCheckout(
  executor: SqlExecutor,
  topupId: string,
  checkout: { id: string; url: string },
): Promise<boolean> {
  const rows = await executor
    .update(topupsTable)
    .set({ checkoutSessionId: checkout.id, checkoutUrl: checkout.url, status: "open" })
    .where(and(eq(topupsTable.id, topupId), eq(topupsTable.status, "creating")))
    .returning({ id: topupsTable.id });
  return rows.length > 0;
}

/** The top-up id a checkout carries back in its metadata, when it has the shape of one. */
export const topupIdOf = (value: string | undefined): string | undefined =>
  value && /^[0-9a-f-]{36}$/i.test(value) ? value : undefined;

/** The top-up a checkout session pays for, by the top-up id Stripe carries back or by the session id. */
export async function lockTopupForCheckout(
  tx: BillingTransaction,
  checkout: { topupId?: string; checkoutSessionId: string },
): Promise<TopupRow | undefined> {
  const byId = topupIdOf(checkout.topupId);
  const rows = await tx
    .select()
    .from(topupsTable)
    .where(
      byId
        ? or(eq(topupsTable.id, byId), eq(topupsTable.checkoutSessionId, checkout.checkoutSessionId))
        : eq(topupsTable.checkoutSessionId, checkout.checkoutSessionId),
    )
    .for("update");
  return rows.find((r) => r.id === byId) ?? rows[0];
}

/** The fields of a locked top-up that deciding a credit needs. */
export type CheckoutTopup = Pick<
  TopupRow,
  "id" | "accountId" | "amount" | "currency" | "status" | "checkoutSessionId"
>;

/** The fields of a locked wallet that deciding a credit needs, and whether its storage period is paid. */
export type CreditedWallet = Pick<
  WalletRow,
  "accountId" | "currency" | "balance" | "shortfall" | "status" | "storageTier"
> & {
  storagePeriodPaid: boolean;
};

export interface LockedCheckouts {
  /** The event ids recorded now (outcome pending); the others were recorded before: redeliveries. */
  recorded: Set<string>;
  topups: CheckoutTopup[];
  wallets: CreditedWallet[];
}

/**
 * One round trip for a batch of paid checkouts, taking locks in the per-event path's order: records the event
 * ids (outcome pending), then (only if any was new) locks in top-up id order every top-up the checkouts may pay
 * for (by the top-up ids they carry back, see topupIdOf, or by checkout session id), then their wallets in
 * account order (the order of every wallet writer), each with whether its storage period starting at
 * `periodStart` is recorded as paid.
 */
export async function recordAndLockCheckouts(
  tx: BillingTransaction,
  batch: {
    events: { eventId: string; type: string }[];
    topupIds: string[];
    checkoutSessionIds: string[];
    periodStart: Date;
  },
): Promise<LockedCheckouts> {
  const events = recordset(
    batch.events.map((e) => ({ event_id: e.eventId, type: e.type })),
    "event_id text, type text",
  );
  // `= any(array(...))` rather than `in (select ...)`: with the OR between them, subquery IN lists could only
  // filter a sequential scan, while arrays let PostgreSQL combine the two indexes.
  const topupIds = sql`array(select jsonb_array_elements_text(${JSON.stringify(batch.topupIds)}::jsonb)::uuid)`;
  const checkoutSessionIds = sql`array(select jsonb_array_elements_text(${JSON.stringify(batch.checkoutSessionIds)}::jsonb))`;
  const [row] = await executePrepared<{
    recorded: string[];
    topups: CheckoutTopup[];
    wallets: CreditedWallet[];
  }>(
    tx,
    "billing_record_and_lock_checkouts",
    sql`
    with recorded as (
           insert into stripe_events (event_id, type, outcome) select c.event_id, c.type, 'pending' from ${events}
           on conflict do nothing
           returning event_id),
         locked_topups as (
           select id, account_id, amount, currency, status, checkout_session_id from topups
            where (id = any(${topupIds}) or checkout_session_id = any(${checkoutSessionIds}))
              and exists (select 1 from recorded)
            order by id
              for update),
         locked_wallets as (
           select w.account_id, w.currency, w.balance, w.shortfall, w.status, w.storage_tier,
                  exists (select 1 from storage_periods p
                           where p.account_id = w.account_id and p.status = 'paid'
                             and p.period_start = ${batch.periodStart.toISOString()}::timestamptz) as storage_period_paid
             from wallets w
            where w.account_id = any(array(select account_id from locked_topups))
            order by w.account_id
              for update of w)
    select (select coalesce(json_agg(event_id), '[]') from recorded) as recorded,
           (select coalesce(json_agg(json_build_object(
              'id', id, 'accountId', account_id, 'amount', amount, 'currency', currency, 'status', status,
              'checkoutSessionId', checkout_session_id)), '[]') from locked_topups) as topups,
           (select coalesce(json_agg(json_build_object(
              'accountId', account_id, 'currency', currency, 'balance', balance, 'shortfall', shortfall,
              'status', status, 'storageTier', storage_tier, 'storagePeriodPaid', storage_period_paid)), '[]')
              from locked_wallets) as wallets`,
  );
  return { recorded: new Set(row!.recorded), topups: row!.topups, wallets: row!.wallets };
}

export interface TopupCredits {
  /** The ledger lines, one per credited top-up, with their running balances. */
  lines: LedgerLine[];
  /** Each credited wallet once, by the sum of its lines. */
  moves: WalletMove[];
  paid: { id: string; checkoutSessionId: string; paymentIntentId: string | null }[];
  paidAt: Date;
  /** Outcomes of the events recorded by recordStripeEvents in this transaction and settled by it. */
  outcomes: { eventId: string; outcome: string }[];
  /** Events recorded in this transaction but applied on their own after it: their ids are taken back. */
  unrecorded: string[];
}

/**
 * Writes a batch of top-up credits in one statement (top-ups and wallets locked by the caller): the ledger
 * lines, the wallets, the top-ups marked paid, the events' outcomes. Returns how many ledger lines went in;
 * fewer than `lines` means one was already there, and the caller must roll the transaction back.
 */
export async function writeTopupCredits(tx: BillingTransaction, credits: TopupCredits): Promise<number> {
  const paid = recordset(
    credits.paid.map((p) => ({
      id: p.id,
      checkout_session_id: p.checkoutSessionId,
      payment_intent_id: p.paymentIntentId,
    })),
    "id uuid, checkout_session_id text, payment_intent_id text",
  );
  const outcomes = recordset(
    credits.outcomes.map((o) => ({ event_id: o.eventId, outcome: o.outcome })),
    "event_id text, outcome text",
  );
  const [row] = await executePrepared<{ inserted: number | string }>(
    tx,
    "billing_write_topup_credits",
    sql`
    with inserted as (${insertLedgerLinesStatement(credits.lines)}),
         moved as (${moveWalletsStatement(credits.moves)}),
         paid as (
           update topups t set status = 'paid', paid_at = ${credits.paidAt.toISOString()}::timestamptz,
                  checkout_session_id = c.checkout_session_id, payment_intent_id = c.payment_intent_id
             from ${paid} where t.id = c.id),
         settled as (
           update stripe_events e set outcome = c.outcome from ${outcomes} where e.event_id = c.event_id),
         unrecorded as (delete from stripe_events where event_id in ${idList(credits.unrecorded)})
    select count(*)::int as inserted from inserted`,
  );
  return Number(row!.inserted);
}

export async function lockTopupByPaymentIntent(
  tx: BillingTransaction,
  paymentIntentId: string,
): Promise<TopupRow | undefined> {
  const rows = await tx
    .select()
    .from(topupsTable)
    .where(eq(topupsTable.paymentIntentId, paymentIntentId))
    .for("update");
  return rows[0];
}

export async function updateTopup(
  tx: BillingTransaction,
  id: string,
  values: Partial<
    Pick<
      TopupRow,
      "status" | "paidAt" | "paymentIntentId" | "refundedAmount" | "checkoutSessionId" | "failureMessage"
    >
  >,
): Promise<void> {
  await tx.update(topupsTable).set(values).where(eq(topupsTable.id, id));
}

export interface PaymentReview {
  stripeEventId: string;
  checkoutSessionId?: string;
  accountId?: string;
  amount?: number;
  currency?: string;
  reason: string;
}

export async function recordPaymentReview(tx: BillingTransaction, review: PaymentReview): Promise<void> {
  await tx.insert(paymentReviewsTable).values({ id: randomUUID(), ...review });
}

export async function lockDispute(
  tx: BillingTransaction,
  disputeId: string,
): Promise<DisputeRow | undefined> {
  const rows = await tx
    .select()
    .from(disputesTable)
    .where(eq(disputesTable.disputeId, disputeId))
    .for("update");
  return rows[0];
}

export async function insertDispute(
  tx: BillingTransaction,
  dispute: Pick<DisputeRow, "disputeId" | "accountId" | "paymentIntentId" | "amount" | "currency" | "status">,
): Promise<void> {
  await tx.insert(disputesTable).values(dispute).onConflictDoNothing();
}

export async function closeDispute(
  tx: BillingTransaction,
  disputeId: string,
  status: "won" | "lost",
  closedAt: Date,
): Promise<void> {
  await tx.update(disputesTable).set({ status, closedAt }).where(eq(disputesTable.disputeId, disputeId));
}

export async function hasOpenDispute(executor: SqlExecutor, accountId: string): Promise<boolean> {
  const rows = await executor
    .select({ id: disputesTable.disputeId })
    .from(disputesTable)
    .where(and(eq(disputesTable.accountId, accountId), eq(disputesTable.status, "open")))
    .limit(1);
  return rows.length > 0;
}

// ---------- auto-recharges (topups with origin auto_recharge) ----------

const IN_FLIGHT = ["creating", "open"] as const;
const isRecharge = eq(topupsTable.origin, "auto_recharge");

/** Records a recharge's intent; undefined when the wallet already has one in flight (the unique index). */
export async function insertRecharge(
  tx: BillingTransaction,
  recharge: NewTopup,
): Promise<TopupRow | undefined> {
  const rows = await tx
    .insert(topupsTable)
    .values({ ...recharge, origin: "auto_recharge", status: "creating" })
    .onConflictDoNothing()
    .returning();
  return rows[0];
}

export async function hasRechargeInFlight(executor: SqlExecutor, accountId: string): Promise<boolean> {
  const rows = await executor
    .select({ id: topupsTable.id })
    .from(topupsTable)
    .where(and(eq(topupsTable.accountId, accountId), isRecharge, inArray(topupsTable.status, [...IN_FLIGHT])))
    .limit(1);
  return rows.length > 0;
}

/** What the account's recharges made since `since` add up to: paid ones and those under way. */
export async function rechargedSince(executor: SqlExecutor, accountId: string, since: Date): Promise<number> {
  const rows = await executor
    .select({ total: sql<string | null>`sum(${topupsTable.amount})` })
    .from(topupsTable)
    .where(
      and(
        eq(topupsTable.accountId, accountId),
        isRecharge,
        inArray(topupsTable.status, [...IN_FLIGHT, "paid"]),
        gte(topupsTable.createdAt, since),
      ),
    );
  return Number(rows[0]?.total ?? 0);
}

export async function latestRecharge(
  executor: SqlExecutor,
  accountId: string,
): Promise<TopupRow | undefined> {
  const rows = await executor
    .select()
    .from(topupsTable)
    .where(and(eq(topupsTable.accountId, accountId), isRecharge))
    .orderBy(desc(topupsTable.createdAt))
    .limit(1);
  return rows[0];
}

/**
 * Claims recharges whose intent is recorded but not yet answered by Stripe, due at `now`: each is not handed out
 * again before `leaseUntil`, so replicas and retries never call Stripe for it at once. No lock outlives this
 * statement, so none is held across the network call.
 */
export async function claimDueRecharges(
  executor: SqlExecutor,
  now: Date,
  leaseUntil: Date,
  limit: number,
): Promise<TopupRow[]> {
  const due = sql`(select id from topups
     where origin = 'auto_recharge' and status = 'creating' and next_attempt_at <= ${now.toISOString()}::timestamptz
     order by next_attempt_at limit ${limit} for update skip locked)`;
  return executor
    .update(topupsTable)
    .set({ nextAttemptAt: leaseUntil })
    .where(sql`${topupsTable.id} in ${due}`)
    .returning();
}

/**
 * Recharges sent to Stripe before `sentBefore` whose outcome (a payment_intent webhook) never arrived, due for a
 * look at their PaymentIntent; each is claimed until `recheckAt` (replicas look once).
 */
export async function claimSilentRecharges(
  executor: SqlExecutor,
  now: Date,
  sentBefore: Date,
  recheckAt: Date,
  limit: number,
): Promise<TopupRow[]> {
  const due = sql`(select id from topups
     where origin = 'auto_recharge' and status = 'open' and payment_intent_id is not null
       and created_at <= ${sentBefore.toISOString()}::timestamptz
       and (next_attempt_at is null or next_attempt_at <= ${now.toISOString()}::timestamptz)
     order by created_at limit ${limit} for update skip locked)`;
  return executor
    .update(topupsTable)
    .set({ nextAttemptAt: recheckAt })
    .where(sql`${topupsTable.id} in ${due}`)
    .returning();
}

/** The recharge a payment_intent event is about: by the id Stripe carries back in metadata, or its intent. */
export async function lockRecharge(
  tx: BillingTransaction,
  where: { rechargeId?: string; paymentIntentId?: string },
): Promise<TopupRow | undefined> {
  const byId = topupIdOf(where.rechargeId);
  const conditions = [
    ...(byId ? [eq(topupsTable.id, byId)] : []),
    ...(where.paymentIntentId ? [eq(topupsTable.paymentIntentId, where.paymentIntentId)] : []),
  ];
  if (conditions.length === 0) return undefined;
  const rows = await tx
    .select()
    .from(topupsTable)
    .where(and(isRecharge, or(...conditions)))
    .orderBy(asc(topupsTable.id))
    .for("update");
  return rows.find((r) => r.id === byId) ?? rows[0];
}

export async function lockTopup(tx: BillingTransaction, id: string): Promise<TopupRow | undefined> {
  const rows = await tx.select().from(topupsTable).where(eq(topupsTable.id, id)).for("update");
  return rows[0];
}

/** Closed wallets' refunds recorded but not yet finished (oldest first). */
export async function refundPendingTopups(executor: SqlExecutor, limit: number): Promise<TopupRow[]> {
  return executor
    .select()
    .from(topupsTable)
    .where(eq(topupsTable.status, "refund_pending"))
    .orderBy(asc(topupsTable.createdAt))
    .limit(limit);
}
