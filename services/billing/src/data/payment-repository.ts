import { randomUUID } from "node:crypto";
import { and, eq, or } from "drizzle-orm";
import type { SqlExecutor } from "@cgs/shared";
import { disputesTable, paymentReviewsTable, stripeEventsTable, topupsTable } from "./billing-tables";
import type { BillingTransaction } from "./wallet-repository";

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
export async function stripeEventSeen(executor: SqlExecutor, eventId: string): Promise<boolean> {
  const rows = await executor
    .select({ eventId: stripeEventsTable.eventId })
    .from(stripeEventsTable)
    .where(eq(stripeEventsTable.eventId, eventId));
  return rows.length > 0;
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

/** The top-up a checkout session pays for, by the top-up id Stripe carries back or by the session id. */
export async function lockTopupForCheckout(
  tx: BillingTransaction,
  checkout: { topupId?: string; checkoutSessionId: string },
): Promise<TopupRow | undefined> {
  const byId = checkout.topupId && /^[0-9a-f-]{36}$/i.test(checkout.topupId) ? checkout.topupId : undefined;
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
    Pick<TopupRow, "status" | "paidAt" | "paymentIntentId" | "refundedAmount" | "checkoutSessionId">
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
