import { and, asc, eq, gt, lte } from "drizzle-orm";
import { meteredSessionsTable } from "./billing-tables";
import type { BillingDatabase } from "./wallet-repository";

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
