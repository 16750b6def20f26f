import { and, eq, lte, sql } from "drizzle-orm";
import { holdsTable } from "./billing-tables";
import { idList, type BillingDatabase, type BillingTransaction } from "./wallet-repository";

/** Money reserved for a session start (see billing-tables.ts). */
export type Hold = typeof holdsTable.$inferSelect;
export type NewHold = typeof holdsTable.$inferInsert;

/** Locks the active holds of these sessions. */
export async function lockActiveHoldsOf(tx: BillingTransaction, sessionIds: string[]) {
  if (sessionIds.length === 0) return [];
  return tx
    .select()
    .from(holdsTable)
    .where(and(sql`${holdsTable.sessionId} in ${idList(sessionIds)}`, eq(holdsTable.status, "active")))
    .for("update");
}

export async function lockActiveHold(tx: BillingTransaction, sessionId: string): Promise<Hold | undefined> {
  const rows = await tx
    .select()
    .from(holdsTable)
    .where(and(eq(holdsTable.sessionId, sessionId), eq(holdsTable.status, "active")))
    .for("update");
  return rows[0];
}

export async function saveHoldRemaining(tx: BillingTransaction, hold: Hold): Promise<void> {
  await tx.update(holdsTable).set({ remaining: hold.remaining }).where(eq(holdsTable.id, hold.id));
}

/** Active holds created before `cutoff` whose session is not being metered (a start that never reported). */
export async function listExpiredHolds(db: BillingDatabase, cutoff: Date, limit: number) {
  return db
    .select({ id: holdsTable.id, accountId: holdsTable.accountId, sessionId: holdsTable.sessionId })
    .from(holdsTable)
    .where(
      and(
        eq(holdsTable.status, "active"),
        lte(holdsTable.createdAt, cutoff),
        sql`not exists (select 1 from metered_sessions m where m.session_id = ${holdsTable.sessionId} and m.status = 'running')`,
      ),
    )
    .limit(limit);
}

/** The session's hold in any status, locked. */
export async function lockHoldOfSession(
  tx: BillingTransaction,
  sessionId: string,
): Promise<Hold | undefined> {
  const rows = await tx.select().from(holdsTable).where(eq(holdsTable.sessionId, sessionId)).for("update");
  return rows[0];
}

export async function lockActiveHoldById(tx: BillingTransaction, id: string): Promise<Hold | undefined> {
  const rows = await tx
    .select()
    .from(holdsTable)
    .where(and(eq(holdsTable.id, id), eq(holdsTable.status, "active")))
    .for("update");
  return rows[0];
}

export async function lockActiveHoldsOfAccount(tx: BillingTransaction, accountId: string): Promise<Hold[]> {
  return tx
    .select()
    .from(holdsTable)
    .where(and(eq(holdsTable.accountId, accountId), eq(holdsTable.status, "active")))
    .for("update");
}

export async function findHoldOwner(db: BillingDatabase, id: string): Promise<string | undefined> {
  const rows = await db
    .select({ accountId: holdsTable.accountId })
    .from(holdsTable)
    .where(eq(holdsTable.id, id));
  return rows[0]?.accountId;
}

export async function insertHold(tx: BillingTransaction, hold: NewHold): Promise<void> {
  await tx.insert(holdsTable).values(hold);
}

export async function markHoldReleased(tx: BillingTransaction, id: string, at: Date): Promise<void> {
  await tx
    .update(holdsTable)
    .set({ status: "released", remaining: 0, releasedAt: at })
    .where(eq(holdsTable.id, id));
}
