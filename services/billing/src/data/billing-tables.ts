import { sql } from "drizzle-orm";
import {
  bigint,
  bigserial,
  boolean,
  check,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from "drizzle-orm/pg-core";

const money = (name: string) => bigint(name, { mode: "number" });
const at = (name: string) => timestamp(name, { withTimezone: true });

/**
 * One wallet per account. `balance` changes only together with a ledger entry; `held` is the part of
 * it reserved by start authorizations (spendable = balance - held).
 */
export const walletsTable = pgTable(
  "wallets",
  {
    accountId: text("account_id").primaryKey(),
    currency: text("currency").notNull(),
    balance: money("balance").notNull().default(0),
    held: money("held").notNull().default(0),
    /**
     * Credit taken back (refund, lost dispute) after it was spent: owed by the player, blocks new starts,
     * settled first by the next top-up. Always ledger sum = balance - shortfall.
     */
    shortfall: money("shortfall").notNull().default(0),
    storageTier: text("storage_tier").notNull(),
    status: text("status").$type<"open" | "closed">().notNull().default("open"),
    createdAt: at("created_at").notNull().defaultNow(),
    closedAt: at("closed_at"),
    /** The player's spending limits (play and storage charges) per UTC day and UTC calendar month; null: none. */
    dailySpendLimit: money("daily_spend_limit"),
    monthlySpendLimit: money("monthly_spend_limit"),
    /**
     * Spending so far in the UTC day `spendDay` (YYYY-MM-DD) and month `spendMonth` (YYYY-MM), moved in the same
     * update as every charge's ledger entry; a charge in a later period starts the count again.
     */
    spendDay: text("spend_day"),
    spentDay: money("spent_day").notNull().default(0),
    spendMonth: text("spend_month"),
    spentMonth: money("spent_month").notNull().default(0),
    /** Auto-recharge: when a charge takes the balance under `threshold`, the saved card is charged up to `to`. */
    autoRechargeEnabled: boolean("auto_recharge_enabled").notNull().default(false),
    autoRechargeThreshold: money("auto_recharge_threshold"),
    autoRechargeTo: money("auto_recharge_to"),
    /** Recharges (paid or under way) in one UTC calendar month never add up to more than this. */
    autoRechargeMonthlyLimit: money("auto_recharge_monthly_limit"),
    /** Failed recharges since the last one that succeeded; at three auto-recharge turns itself off. */
    autoRechargeFailures: integer("auto_recharge_failures").notNull().default(0),
    /** Why auto-recharge turned itself off (failures, the card removed); cleared when the player turns it on. */
    autoRechargeOffReason: text("auto_recharge_off_reason"),
    /** Why the last recharge that was due was not made (the monthly limit); cleared by the next recharge. */
    autoRechargeSkipped: text("auto_recharge_skipped"),
    /** The Stripe Customer that saved cards belong to (created at the first card setup). */
    stripeCustomerId: text("stripe_customer_id"),
  },
  (t) => [
    check("wallets_balance_non_negative", sql`${t.balance} >= 0`),
    check("wallets_held_within_balance", sql`${t.held} >= 0 and ${t.held} <= ${t.balance}`),
    check("wallets_shortfall_non_negative", sql`${t.shortfall} >= 0`),
    check("wallets_spent_non_negative", sql`${t.spentDay} >= 0 and ${t.spentMonth} >= 0`),
  ],
);

/** Append-only: every balance change, with a unique reference so nothing is applied twice. */
export const ledgerEntriesTable = pgTable(
  "ledger_entries",
  {
    id: bigserial("id", { mode: "number" }).primaryKey(),
    accountId: text("account_id").notNull(),
    kind: text("kind").$type<LedgerKind>().notNull(),
    /** e.g. `topup:cs_123`, `usage:<session>:<minute>`, `storage:<account>:2026-11`. */
    reference: text("reference").notNull(),
    amount: money("amount").notNull(),
    currency: text("currency").notNull(),
    balanceAfter: money("balance_after").notNull(),
    details: jsonb("details").$type<Record<string, unknown>>().notNull().default({}),
    createdAt: at("created_at").notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex("ledger_entries_reference_key").on(t.reference),
    index("ledger_entries_account_idx").on(t.accountId, t.id),
    check("ledger_entries_amount_not_zero", sql`${t.amount} <> 0`),
    check("ledger_entries_balance_after_non_negative", sql`${t.balanceAfter} >= 0`),
  ],
);

/** `refund` and `dispute_lost` take credit back (Stripe refunds and lost disputes). */
export type LedgerKind =
  "topup" | "usage" | "usage_refund" | "storage" | "refund" | "dispute_lost" | "adjustment";

/** Money reserved for a session start; consumed as its minutes are charged, released when it ends or fails. */
export const holdsTable = pgTable(
  "holds",
  {
    id: uuid("id").primaryKey(),
    accountId: text("account_id").notNull(),
    sessionId: text("session_id").notNull(),
    amount: money("amount").notNull(),
    remaining: money("remaining").notNull(),
    ratePerMinute: integer("rate_per_minute").notNull(),
    currency: text("currency").notNull(),
    status: text("status").$type<"active" | "released">().notNull().default("active"),
    createdAt: at("created_at").notNull().defaultNow(),
    releasedAt: at("released_at"),
  },
  (t) => [
    uniqueIndex("holds_session_key").on(t.sessionId),
    index("holds_active_idx")
      .on(t.createdAt)
      .where(sql`${t.status} = 'active'`),
    check("holds_remaining_range", sql`${t.remaining} >= 0 and ${t.remaining} <= ${t.amount}`),
  ],
);

/** A session being metered: minute k (from 0) is due at startedAt + k minutes and charged once. */
export const meteredSessionsTable = pgTable(
  "metered_sessions",
  {
    sessionId: text("session_id").primaryKey(),
    accountId: text("account_id").notNull(),
    ratePerMinute: integer("rate_per_minute").notNull(),
    currency: text("currency").notNull(),
    startedAt: at("started_at").notNull(),
    stoppedAt: at("stopped_at"),
    /** Minutes charged so far (minutes 0 .. chargedMinutes-1). */
    chargedMinutes: integer("charged_minutes").notNull().default(0),
    /** When the next minute starts; the metering loop picks sessions whose nextMinuteAt has passed. */
    nextMinuteAt: at("next_minute_at").notNull(),
    status: text("status").$type<"running" | "stopped">().notNull().default("running"),
    exhaustedAt: at("exhausted_at"),
    /** The forecast last published in credits.low: when the wallet stops paying; null while it covers enough. */
    lowCreditRunsOutAt: at("low_credit_runs_out_at"),
    /** What that forecast's stop is for: `balance`, or the spending limit's period (`day`, `month`). */
    lowCreditReason: text("low_credit_reason"),
    /** Minor units the wallet could not cover (the balance never goes negative). */
    uncovered: money("uncovered").notNull().default(0),
  },
  (t) => [
    index("metered_sessions_due_idx")
      .on(t.nextMinuteAt)
      .where(sql`${t.status} = 'running'`),
    index("metered_sessions_account_idx").on(t.accountId),
  ],
);

export type TopupStatus =
  | "creating"
  | "open"
  | "paid"
  // Paid to a closed wallet: the refund recorded as intended but not yet confirmed by Stripe.
  | "refund_pending"
  | "refunded_closed_wallet"
  // Auto-recharges only: the off-session payment was declined, or the bank wants the player to confirm it.
  | "failed"
  | "requires_action";

/**
 * Money paid in: a top-up the player asked for (origin `checkout`, credited by the provider's webhook, keyed by
 * checkout session) or an auto-recharge (origin `auto_recharge`: an off-session PaymentIntent on the saved card,
 * `creating` while the intent is recorded but Stripe not yet answered, `open` while its webhook is awaited).
 * Refunds and disputes find either by its payment intent.
 */
export const topupsTable = pgTable(
  "topups",
  {
    id: uuid("id").primaryKey(),
    accountId: text("account_id").notNull(),
    amount: money("amount").notNull(),
    currency: text("currency").notNull(),
    /** The client's Idempotency-Key header, when sent. */
    clientKey: text("client_key"),
    provider: text("provider").notNull(),
    origin: text("origin").$type<"checkout" | "auto_recharge">().notNull().default("checkout"),
    checkoutSessionId: text("checkout_session_id"),
    checkoutUrl: text("checkout_url"),
    status: text("status").$type<TopupStatus>().notNull().default("creating"),
    /** Auto-recharge: the saved card charged (a payment_methods row). */
    paymentMethodRef: uuid("payment_method_ref"),
    /** Auto-recharge: not sent to Stripe again before this (a replica that claimed it is calling Stripe). */
    nextAttemptAt: at("next_attempt_at"),
    /** Auto-recharge: why the payment failed or needs the player, in Stripe's words. */
    failureMessage: text("failure_message"),
    /** Stripe's payment intent of the paid checkout: refunds and disputes name it. */
    paymentIntentId: text("payment_intent_id"),
    /** Credit already taken back by refunds of this payment (cumulative, never above `amount`). */
    refundedAmount: money("refunded_amount").notNull().default(0),
    createdAt: at("created_at").notNull().defaultNow(),
    paidAt: at("paid_at"),
  },
  (t) => [
    uniqueIndex("topups_client_key").on(t.accountId, t.clientKey),
    index("topups_checkout_session_idx").on(t.checkoutSessionId),
    index("topups_payment_intent_idx").on(t.paymentIntentId),
    check("topups_amount_positive", sql`${t.amount} > 0`),
    // Never two recharges in flight for one wallet, whatever races.
    uniqueIndex("topups_one_recharge_in_flight")
      .on(t.accountId)
      .where(sql`${t.origin} = 'auto_recharge' and ${t.status} in ('creating', 'open')`),
    index("topups_recharges_idx")
      .on(t.accountId, t.createdAt)
      .where(sql`${t.origin} = 'auto_recharge'`),
  ],
);

/** A Checkout Session in setup mode the platform opened to save a card; only these save one. */
export const cardSetupsTable = pgTable(
  "card_setups",
  {
    id: uuid("id").primaryKey(),
    accountId: text("account_id").notNull(),
    checkoutSessionId: text("checkout_session_id"),
    checkoutUrl: text("checkout_url"),
    status: text("status").$type<"creating" | "open" | "complete">().notNull().default("creating"),
    createdAt: at("created_at").notNull().defaultNow(),
    completedAt: at("completed_at"),
  },
  (t) => [index("card_setups_checkout_session_idx").on(t.checkoutSessionId)],
);

/**
 * Cards saved for auto-recharge. At most one `active` per account; a replaced or removed card is `detaching`
 * until Stripe has detached it (the call is made after the transaction that decided it), then `detached`.
 */
export const paymentMethodsTable = pgTable(
  "payment_methods",
  {
    id: uuid("id").primaryKey(),
    accountId: text("account_id").notNull(),
    customerId: text("customer_id").notNull(),
    paymentMethodId: text("payment_method_id").notNull(),
    brand: text("brand").notNull(),
    last4: text("last4").notNull(),
    expMonth: integer("exp_month").notNull(),
    expYear: integer("exp_year").notNull(),
    status: text("status").$type<"active" | "detaching" | "detached">().notNull().default("active"),
    createdAt: at("created_at").notNull().defaultNow(),
    removedAt: at("removed_at"),
  },
  (t) => [
    uniqueIndex("payment_methods_one_active")
      .on(t.accountId)
      .where(sql`${t.status} = 'active'`),
    index("payment_methods_detaching_idx")
      .on(t.createdAt)
      .where(sql`${t.status} = 'detaching'`),
  ],
);

/** Stripe event ids already handled, so a redelivery is acknowledged without work. */
export const stripeEventsTable = pgTable("stripe_events", {
  eventId: text("event_id").primaryKey(),
  type: text("type").notNull(),
  outcome: text("outcome").notNull(),
  receivedAt: at("received_at").notNull().defaultNow(),
});

/** A Stripe dispute of a top-up's payment: while one is open the wallet cannot start sessions. */
export const disputesTable = pgTable(
  "disputes",
  {
    disputeId: text("dispute_id").primaryKey(),
    accountId: text("account_id").notNull(),
    paymentIntentId: text("payment_intent_id").notNull(),
    amount: money("amount").notNull(),
    currency: text("currency").notNull(),
    status: text("status").$type<"open" | "won" | "lost">().notNull().default("open"),
    openedAt: at("opened_at").notNull().defaultNow(),
    closedAt: at("closed_at"),
  },
  (t) => [
    index("disputes_open_idx")
      .on(t.accountId)
      .where(sql`${t.status} = 'open'`),
  ],
);

/** Payments that reached Stripe but match no top-up the platform created: kept for a person, never credited. */
export const paymentReviewsTable = pgTable("payment_reviews", {
  id: uuid("id").primaryKey(),
  stripeEventId: text("stripe_event_id").notNull(),
  checkoutSessionId: text("checkout_session_id"),
  accountId: text("account_id"),
  amount: money("amount"),
  currency: text("currency"),
  reason: text("reason").notNull(),
  createdAt: at("created_at").notNull().defaultNow(),
});

/** One row per (account, billing period) once the period has been looked at: paid or still unpaid. */
export const storagePeriodsTable = pgTable(
  "storage_periods",
  {
    accountId: text("account_id").notNull(),
    periodStart: at("period_start").notNull(),
    periodEnd: at("period_end").notNull(),
    tier: text("tier").notNull(),
    amount: money("amount").notNull(),
    status: text("status").$type<"paid" | "unpaid">().notNull(),
    paidAt: at("paid_at"),
    updatedAt: at("updated_at").notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.accountId, t.periodStart] }),
    index("storage_periods_unpaid_idx")
      .on(t.periodStart)
      .where(sql`${t.status} = 'unpaid'`),
  ],
);

export const billingTables = {
  walletsTable,
  ledgerEntriesTable,
  holdsTable,
  meteredSessionsTable,
  topupsTable,
  stripeEventsTable,
  storagePeriodsTable,
  disputesTable,
  paymentReviewsTable,
  cardSetupsTable,
  paymentMethodsTable,
};
