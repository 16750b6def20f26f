import { and, asc, eq, gt, lte, sql } from "drizzle-orm";
import { meteredSessionsTable } from "./billing-tables";
import type { BillingDatabase, BillingTransaction, SpendPeriods } from "./wallet-repository";

export type MeteredSession = typeof meteredSessionsTable.$inferSelect;

export interface RunningSessionRef {
  sessionId: string;
  accountId: string;
}

/** Running metered sessions that began before `startedBefore`, in session-id pages after `afterSessionId`. */
export async function listRunningSessions(
  db: BillingDatabase,
  options: { startedBefore: Date; afterSessionId?: string; limit: number },
): Promise<RunningSessionRef[]> {
  const conditions = [
    eq(meteredSessionsTable.status, "running"),
    lte(meteredSessionsTable.startedAt, options.startedBefore),
  ];
  if (options.afterSessionId) conditions.push(gt(meteredSessionsTable.sessionId, options.afterSessionId));
  return db
    .select({ sessionId: meteredSessionsTable.sessionId, accountId: meteredSessionsTable.accountId })
    .from(meteredSessionsTable)
    .where(and(...conditions))
    .orderBy(asc(meteredSessionsTable.sessionId))
    .limit(options.limit);
}

/** One session's next minute, paid in full; the caller holds the session, wallet and hold locks. */
export interface MinuteCharge {
  sessionId: string;
  accountId: string;
  minute: number;
  amount: number;
  /** Part of `amount` taken from the session's hold (also leaves the wallet's held amount). */
  fromHold: number;
  holdId: string | null;
  currency: string;
  balanceAfter: number;
  nextMinuteAt: Date;
}

const recordset = (charges: MinuteCharge[]) => sql`jsonb_to_recordset(${JSON.stringify(
  charges.map((c) => ({
    session_id: c.sessionId,
    account_id: c.accountId,
    minute: c.minute,
    amount: c.amount,
    from_hold: c.fromHold,
    hold_id: c.holdId,
    currency: c.currency,
    balance_after: c.balanceAfter,
    next_minute_at: c.nextMinuteAt.toISOString(),
  })),
)}::jsonb) as c(session_id text, account_id text, minute int, amount bigint, from_hold bigint, hold_id uuid,
  currency text, balance_after bigint, next_minute_at timestamptz)`;

/**
 * Charges a batch of session-minutes (at most one per wallet) in four set-based statements: the ledger
 * entries, then the wallets and holds of the entries that went in (a reference already in the ledger
 * moves no money), then every session's minute counter. Returns the sessions whose money moved.
 */
export async function chargeMinutesInBulk(
  tx: BillingTransaction,
  charges: MinuteCharge[],
  periods: SpendPeriods,
): Promise<Set<string>> {
  if (charges.length === 0) return new Set();
  const inserted = await tx.execute(sql`
    insert into ledger_entries (account_id, kind, reference, amount, currency, balance_after, details)
    select c.account_id, 'usage', 'usage:' || c.session_id || ':' || c.minute, -c.amount, c.currency,
           c.balance_after,
           jsonb_build_object('sessionId', c.session_id, 'minute', c.minute, 'ratePerMinute', c.amount, 'uncovered', 0)
      from ${recordset(charges)}
    on conflict (reference) do nothing
    returning details->>'sessionId' as session_id`);
  const charged = new Set((inserted.rows as { session_id: string }[]).map((r) => r.session_id));
  const applied = charged.size === charges.length ? charges : charges.filter((c) => charged.has(c.sessionId));
  if (applied.length > 0) {
    const batch = recordset(applied);
    await tx.execute(sql`
      update wallets w set balance = w.balance - c.amount, held = w.held - c.from_hold,
             spent_day = case when w.spend_day = ${periods.day} then w.spent_day else 0 end + c.amount,
             spend_day = ${periods.day},
             spent_month = case when w.spend_month = ${periods.month} then w.spent_month else 0 end + c.amount,
             spend_month = ${periods.month}
        from ${batch} where w.account_id = c.account_id`);
    await tx.execute(sql`
      update holds h set remaining = h.remaining - c.from_hold
        from ${batch} where c.hold_id is not null and h.id = c.hold_id`);
  }
  await tx.execute(sql`
    update metered_sessions m set charged_minutes = c.minute + 1, next_minute_at = c.next_minute_at
      from ${recordset(charges)} where m.session_id = c.session_id`);
  return charged;
}

/**
 * Claims up to `limit` running sessions whose next minute has started, in account order, skipping those
 * another replica holds: replicas split the work and never charge one session at once.
 */
export async function claimDueSessions(tx: BillingTransaction, now: Date, limit: number) {
  return tx
    .select()
    .from(meteredSessionsTable)
    .where(and(eq(meteredSessionsTable.status, "running"), lte(meteredSessionsTable.nextMinuteAt, now)))
    .orderBy(asc(meteredSessionsTable.accountId), asc(meteredSessionsTable.sessionId))
    .limit(limit)
    .for("update", { skipLocked: true });
}

export async function lockMeteredSession(
  tx: BillingTransaction,
  sessionId: string,
): Promise<MeteredSession | undefined> {
  const rows = await tx
    .select()
    .from(meteredSessionsTable)
    .where(eq(meteredSessionsTable.sessionId, sessionId))
    .for("update");
  return rows[0];
}

/** The account's running metered sessions (normally one), locked in session order. */
export async function lockRunningSessionsOf(
  tx: BillingTransaction,
  accountId: string,
): Promise<MeteredSession[]> {
  return tx
    .select()
    .from(meteredSessionsTable)
    .where(and(eq(meteredSessionsTable.accountId, accountId), eq(meteredSessionsTable.status, "running")))
    .orderBy(asc(meteredSessionsTable.sessionId))
    .for("update");
}

/** Records a session for metering; false when it was already recorded. */
export async function insertMeteredSession(
  tx: BillingTransaction,
  session: typeof meteredSessionsTable.$inferInsert,
): Promise<boolean> {
  const inserted = await tx
    .insert(meteredSessionsTable)
    .values(session)
    .onConflictDoNothing()
    .returning({ sessionId: meteredSessionsTable.sessionId });
  return inserted.length > 0;
}

export async function saveMeteredSession(
  tx: BillingTransaction,
  session: MeteredSession,
  nextMinuteAt: Date,
): Promise<void> {
  await tx
    .update(meteredSessionsTable)
    .set({
      chargedMinutes: session.chargedMinutes,
      nextMinuteAt,
      uncovered: session.uncovered,
      exhaustedAt: session.exhaustedAt,
      lowCreditRunsOutAt: session.lowCreditRunsOutAt,
      lowCreditReason: session.lowCreditReason,
      status: session.status,
      stoppedAt: session.stoppedAt,
    })
    .where(eq(meteredSessionsTable.sessionId, session.sessionId));
}
