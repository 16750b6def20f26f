import { and, eq, lte, min, sql } from "drizzle-orm";
import type { SqlExecutor } from "@cgs/shared";
import { meteredSessionsTable } from "./billing-tables";

/** Seconds since the oldest running minute that is due but not yet charged; 0 when metering is current. */
export async function meteringLagSeconds(db: SqlExecutor, now: Date): Promise<number> {
  const [row] = await db
    .select({ oldest: min(meteredSessionsTable.nextMinuteAt) })
    .from(meteredSessionsTable)
    .where(
      and(
        eq(meteredSessionsTable.status, "running"),
        lte(meteredSessionsTable.nextMinuteAt, sql`${now.toISOString()}::timestamptz`),
      ),
    );
  const oldest = row?.oldest;
  return oldest ? Math.max(0, (now.getTime() - new Date(oldest).getTime()) / 1000) : 0;
}
