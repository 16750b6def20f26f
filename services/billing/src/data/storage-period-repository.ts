import { and, asc, eq, gt, ne, notExists, sql } from "drizzle-orm";
import type { SqlExecutor } from "@cgs/shared";
import { storagePeriodsTable, walletsTable } from "./billing-tables";
import type { BillingDatabase, BillingTransaction } from "./wallet-repository";

/** The status recorded for an account's period, if a charge was attempted. */
export async function recordedPeriodStatus(
  executor: SqlExecutor,
  accountId: string,
  periodStart: Date,
): Promise<string | undefined> {
  const rows = await executor
    .select({ status: storagePeriodsTable.status })
    .from(storagePeriodsTable)
    .where(
      and(eq(storagePeriodsTable.accountId, accountId), eq(storagePeriodsTable.periodStart, periodStart)),
    );
  return rows[0]?.status;
}

/** Records the outcome of a period's charge (paid, or unpaid to retry), replacing an earlier attempt's. */
export async function saveStoragePeriod(
  tx: BillingTransaction,
  row: typeof storagePeriodsTable.$inferInsert,
): Promise<void> {
  const { status, tier, amount, paidAt, updatedAt } = row;
  await tx
    .insert(storagePeriodsTable)
    .values(row)
    .onConflictDoUpdate({
      target: [storagePeriodsTable.accountId, storagePeriodsTable.periodStart],
      set: { status, tier, amount, paidAt, updatedAt },
    });
}

/** Open wallets on a storage tier whose period starting at `periodStart` is not paid, in account pages. */
export async function listWalletsWithUnpaidPeriod(
  db: BillingDatabase,
  periodStart: Date,
  afterAccountId: string,
  limit: number,
): Promise<{ accountId: string }[]> {
  return db
    .select({ accountId: walletsTable.accountId })
    .from(walletsTable)
    .where(
      and(
        eq(walletsTable.status, "open"),
        ne(walletsTable.storageTier, "none"),
        gt(walletsTable.accountId, afterAccountId),
        notExists(
          db
            .select({ one: sql`1` })
            .from(storagePeriodsTable)
            .where(
              and(
                eq(storagePeriodsTable.accountId, walletsTable.accountId),
                eq(storagePeriodsTable.periodStart, periodStart),
                eq(storagePeriodsTable.status, "paid"),
              ),
            ),
        ),
      ),
    )
    .orderBy(asc(walletsTable.accountId))
    .limit(limit);
}
