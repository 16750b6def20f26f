import { and, asc, eq } from "drizzle-orm";
import type { SqlExecutor } from "@cgs/shared";
import { cardSetupsTable, paymentMethodsTable } from "./billing-tables";
import type { BillingTransaction } from "./wallet-repository";
import { topupIdOf } from "./payment-repository";

export type CardSetupRow = typeof cardSetupsTable.$inferSelect;
export type SavedCardRow = typeof paymentMethodsTable.$inferSelect;

export async function insertCardSetup(
  executor: SqlExecutor,
  setup: typeof cardSetupsTable.$inferInsert,
): Promise<void> {
  await executor.insert(cardSetupsTable).values(setup);
}

export async function storeCardSetupCheckout(
  executor: SqlExecutor,
  setupId: string,
  checkout: { id: string; url: string },
): Promise<void> {
  await executor
    .update(cardSetupsTable)
    .set({ checkoutSessionId: checkout.id, checkoutUrl: checkout.url, status: "open" })
    .where(and(eq(cardSetupsTable.id, setupId), eq(cardSetupsTable.status, "creating")));
}

export async function findCardSetupByCheckout(
  executor: SqlExecutor,
  checkoutSessionId: string,
): Promise<CardSetupRow | undefined> {
  const rows = await executor
    .select()
    .from(cardSetupsTable)
    .where(eq(cardSetupsTable.checkoutSessionId, checkoutSessionId));
  return rows[rows.length - 1];
}

/** The setup a completed setup-mode checkout belongs to: by the id Stripe carries back, or the checkout's id. */
export async function lockCardSetup(
  tx: BillingTransaction,
  where: { setupId?: string; checkoutSessionId: string },
): Promise<CardSetupRow | undefined> {
  const byId = topupIdOf(where.setupId);
  const rows = await tx
    .select()
    .from(cardSetupsTable)
    .where(
      byId ? eq(cardSetupsTable.id, byId) : eq(cardSetupsTable.checkoutSessionId, where.checkoutSessionId),
    )
    .for("update");
  return rows[0];
}

export async function completeCardSetup(tx: BillingTransaction, setupId: string, at: Date): Promise<void> {
  await tx
    .update(cardSetupsTable)
    .set({ status: "complete", completedAt: at })
    .where(eq(cardSetupsTable.id, setupId));
}

export async function findActiveCard(
  executor: SqlExecutor,
  accountId: string,
): Promise<SavedCardRow | undefined> {
  const rows = await executor
    .select()
    .from(paymentMethodsTable)
    .where(and(eq(paymentMethodsTable.accountId, accountId), eq(paymentMethodsTable.status, "active")));
  return rows[0];
}

export async function findCard(executor: SqlExecutor, id: string): Promise<SavedCardRow | undefined> {
  const rows = await executor.select().from(paymentMethodsTable).where(eq(paymentMethodsTable.id, id));
  return rows[0];
}

/** The account's active card becomes `detaching` (Stripe detaches it after the commit); the one retired, if any. */
export async function retireActiveCard(
  tx: BillingTransaction,
  accountId: string,
  at: Date,
): Promise<SavedCardRow | undefined> {
  const rows = await tx
    .update(paymentMethodsTable)
    .set({ status: "detaching", removedAt: at })
    .where(and(eq(paymentMethodsTable.accountId, accountId), eq(paymentMethodsTable.status, "active")))
    .returning();
  return rows[0];
}

export async function insertCard(
  tx: BillingTransaction,
  card: typeof paymentMethodsTable.$inferInsert,
): Promise<void> {
  await tx.insert(paymentMethodsTable).values(card);
}

export async function listDetachingCards(executor: SqlExecutor, limit: number): Promise<SavedCardRow[]> {
  return executor
    .select()
    .from(paymentMethodsTable)
    .where(eq(paymentMethodsTable.status, "detaching"))
    .orderBy(asc(paymentMethodsTable.createdAt))
    .limit(limit);
}

export async function markCardDetached(executor: SqlExecutor, id: string): Promise<void> {
  await executor
    .update(paymentMethodsTable)
    .set({ status: "detached" })
    .where(and(eq(paymentMethodsTable.id, id), eq(paymentMethodsTable.status, "detaching")));
}
