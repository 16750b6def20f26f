import { and, asc, eq, sql, type SQL } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import { metrics, type Database, type SqlExecutor, type Transaction } from "@cgs/shared";
import { ledgerEntriesTable, walletsTable, type LedgerKind } from "./billing-tables";
import type * as schema from "./schema";

export type BillingSchema = typeof schema;
export type BillingDatabase = Database<BillingSchema>;
export type BillingTransaction = Transaction<BillingSchema>;

export type WalletRow = typeof walletsTable.$inferSelect;

/** Creates the account's wallet on first contact; false when it exists (and then nothing changes). */
export async function createWalletIfMissing(
  tx: BillingTransaction,
  wallet: { accountId: string; currency: string; storageTier: string },
): Promise<boolean> {
  const created = await tx
    .insert(walletsTable)
    .values(wallet)
    .onConflictDoNothing()
    .returning({ accountId: walletsTable.accountId });
  return created.length > 0;
}

/** Locks the wallet row for the rest of the transaction: every balance change goes through this. */
export async function lockWallet(tx: BillingTransaction, accountId: string): Promise<WalletRow | undefined> {
  const rows = await tx
    .select()
    .from(walletsTable)
    .where(eq(walletsTable.accountId, accountId))
    .for("update");
  return rows[0];
}

/** A JSON array as one bind parameter: a batch of thousands of ids stays one parameter, not thousands. */
export const idList = (ids: string[]) =>
  sql`(select jsonb_array_elements_text(${JSON.stringify(ids)}::jsonb))`;

/**
 * A batch of rows as one jsonb bind parameter, read back as the record set `c` with these columns: a set-based
 * statement over thousands of rows stays one parameter and one round trip.
 */
export const recordset = (rows: object[], columns: string): SQL =>
  sql`jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) as c(${sql.raw(columns)})`;

const dialect = new PgDialect();

/**
 * Runs a statement whose text never changes (its data travels in parameters) as a named prepared statement:
 * PostgreSQL parses and plans it once per connection instead of on every call. The batch statements of the
 * webhook spend more time in planning than in execution otherwise.
 */
export async function executePrepared<TRow>(
  tx: BillingTransaction,
  name: string,
  statement: SQL,
): Promise<TRow[]> {
  const prepared = tx._.session.prepareQuery(dialect.sqlToQuery(statement), undefined, name, false);
  const result = (await prepared.execute()) as { rows: TRow[] };
  return result.rows;
}

/** Locks many wallets in account order (the one lock order everywhere, so replicas never deadlock). */
export async function lockWalletsInOrder(tx: BillingTransaction, accountIds: string[]): Promise<WalletRow[]> {
  if (accountIds.length === 0) return [];
  return tx
    .select()
    .from(walletsTable)
    .where(sql`${walletsTable.accountId} in ${idList([...new Set(accountIds)])}`)
    .orderBy(asc(walletsTable.accountId))
    .for("update");
}

/** The wallet's settings: spending limits and auto-recharge (never the money, which moves only with the ledger). */
export type WalletSettings = Partial<
  Pick<
    WalletRow,
    | "dailySpendLimit"
    | "monthlySpendLimit"
    | "autoRechargeEnabled"
    | "autoRechargeThreshold"
    | "autoRechargeTo"
    | "autoRechargeMonthlyLimit"
    | "autoRechargeFailures"
    | "autoRechargeOffReason"
    | "autoRechargeSkipped"
  >
>;

/** Changes settings of a wallet the caller has locked, and the row in hand with them. */
export async function updateWalletSettings(
  tx: BillingTransaction,
  wallet: WalletRow,
  changes: WalletSettings,
): Promise<void> {
  if (Object.keys(changes).length === 0) return;
  await tx.update(walletsTable).set(changes).where(eq(walletsTable.accountId, wallet.accountId));
  Object.assign(wallet, changes);
}

/** Records the account's Stripe Customer unless one is recorded already; answers the one that is. */
export async function storeCustomerIfMissing(
  executor: SqlExecutor,
  accountId: string,
  customerId: string,
): Promise<string> {
  const rows = await executor
    .update(walletsTable)
    .set({ stripeCustomerId: sql`coalesce(${walletsTable.stripeCustomerId}, ${customerId})` })
    .where(eq(walletsTable.accountId, accountId))
    .returning({ customerId: walletsTable.stripeCustomerId });
  return rows[0]?.customerId ?? customerId;
}

/** Closes the wallet (account purge): no top-ups, starts or storage charges afterwards. */
export async function markWalletClosed(tx: BillingTransaction, accountId: string, at: Date): Promise<void> {
  await tx
    .update(walletsTable)
    .set({ status: "closed", closedAt: at })
    .where(eq(walletsTable.accountId, accountId));
}

export interface LedgerPosting {
  kind: LedgerKind;
  /** Unique across the ledger: the same reference is never applied twice. */
  reference: string;
  /** Signed minor units: positive credits, negative debits. */
  amount: number;
  details?: Record<string, unknown>;
  /** Change to the wallet's held amount in the same update (negative when usage consumes a hold). */
  heldDelta?: number;
  /**
   * Change to the shortfall in the same update: the balance moves by amount + shortfallDelta, so
   * ledger sum = balance - shortfall holds (a take-back beyond the spendable balance raises it, a top-up
   * settles it first).
   */
  shortfallDelta?: number;
  /**
   * Play and storage: the entry counts as spending (a debit adds, a refunded debit takes away) in this UTC day and
   * month, moved in the same update.
   */
  spending?: SpendPeriods;
}

/** A UTC day (YYYY-MM-DD) and calendar month (YYYY-MM): the periods of spending limits. */
export interface SpendPeriods {
  day: string;
  month: string;
}

/** The wallet's spending counters after `spent` more (negative: given back) in `periods`. */
export function countSpending(
  wallet: Pick<WalletRow, "spendDay" | "spentDay" | "spendMonth" | "spentMonth">,
  periods: SpendPeriods,
  spent: number,
): Pick<WalletRow, "spendDay" | "spentDay" | "spendMonth" | "spentMonth"> {
  return {
    spendDay: periods.day,
    spentDay: Math.max(0, (wallet.spendDay === periods.day ? wallet.spentDay : 0) + spent),
    spendMonth: periods.month,
    spentMonth: Math.max(0, (wallet.spendMonth === periods.month ? wallet.spentMonth : 0) + spent),
  };
}

export type PostingResult =
  { applied: true; balance: number; held: number } | { applied: false; reason: "duplicate" | "insufficient" };

/**
 * Appends one ledger entry and moves the balance in the same transaction. The wallet must already be
 * locked by the caller (lockWallet). A reference already in the ledger is a no-op; a debit that would
 * take the balance below zero is refused (and the CHECK constraint would refuse it too).
 */
export async function postLedgerEntry(
  tx: BillingTransaction,
  wallet: WalletRow,
  posting: LedgerPosting,
): Promise<PostingResult> {
  const shortfallDelta = posting.shortfallDelta ?? 0;
  const balance = wallet.balance + posting.amount + shortfallDelta;
  const held = wallet.held + (posting.heldDelta ?? 0);
  const shortfall = wallet.shortfall + shortfallDelta;
  if (balance < 0 || held < 0 || held > balance || shortfall < 0) {
    return { applied: false, reason: "insufficient" };
  }
  const inserted = await tx
    .insert(ledgerEntriesTable)
    .values({
      accountId: wallet.accountId,
      kind: posting.kind,
      reference: posting.reference,
      amount: posting.amount,
      currency: wallet.currency,
      balanceAfter: balance,
      details: posting.details ?? {},
    })
    .onConflictDoNothing({ target: ledgerEntriesTable.reference })
    .returning({ id: ledgerEntriesTable.id });
  if (inserted.length === 0) return { applied: false, reason: "duplicate" };
  const counters = posting.spending ? countSpending(wallet, posting.spending, -posting.amount) : {};
  await tx
    .update(walletsTable)
    .set({
      balance: sql`${walletsTable.balance} + ${posting.amount + shortfallDelta}`,
      held: sql`${walletsTable.held} + ${posting.heldDelta ?? 0}`,
      shortfall: sql`${walletsTable.shortfall} + ${shortfallDelta}`,
      ...counters,
    })
    .where(eq(walletsTable.accountId, wallet.accountId));
  wallet.balance = balance;
  wallet.held = held;
  wallet.shortfall = shortfall;
  Object.assign(wallet, counters);
  // Counted at the one place money moves; a transaction rolled back after this overcounts (rare, and only up).
  if (posting.amount !== 0)
    metrics.credits.labels(posting.amount > 0 ? "in" : "out", wallet.currency).inc(Math.abs(posting.amount));
  return { applied: true, balance, held };
}

/** One ledger entry of a set-based posting, its balanceAfter worked out by the caller from the locked wallet. */
export interface LedgerLine {
  accountId: string;
  kind: LedgerKind;
  reference: string;
  amount: number;
  currency: string;
  balanceAfter: number;
  details: Record<string, unknown>;
}

/**
 * The statement appending many ledger entries (their wallets locked by the caller), returning the references
 * that went in: one already in the ledger is skipped, and then its money must not move.
 */
export function insertLedgerLinesStatement(lines: LedgerLine[]): SQL {
  return sql`
    insert into ledger_entries (account_id, kind, reference, amount, currency, balance_after, details)
    select c.account_id, c.kind, c.reference, c.amount, c.currency, c.balance_after, c.details
      from ${recordset(
        lines.map((l) => ({
          account_id: l.accountId,
          kind: l.kind,
          reference: l.reference,
          amount: l.amount,
          currency: l.currency,
          balance_after: l.balanceAfter,
          details: l.details,
        })),
        "account_id text, kind text, reference text, amount bigint, currency text, balance_after bigint, details jsonb",
      )}
    on conflict (reference) do nothing
    returning reference`;
}

/** What one set-based posting moves on one wallet: the sum of its lines (one row per wallet). */
export interface WalletMove {
  accountId: string;
  balanceDelta: number;
}

/** The statement moving many locked wallets' balances; each wallet appears once (sum its lines first). */
export function moveWalletsStatement(moves: WalletMove[]): SQL {
  return sql`
    update wallets w set balance = w.balance + c.balance_delta
      from ${recordset(
        moves.map((m) => ({ account_id: m.accountId, balance_delta: m.balanceDelta })),
        "account_id text, balance_delta bigint",
      )}
     where w.account_id = c.account_id`;
}

/** Changes only the held amount (placing or releasing a hold); the balance and ledger are untouched. */
export async function adjustHeld(tx: BillingTransaction, wallet: WalletRow, delta: number): Promise<void> {
  if (delta === 0) return;
  await tx
    .update(walletsTable)
    .set({ held: sql`${walletsTable.held} + ${delta}` })
    .where(and(eq(walletsTable.accountId, wallet.accountId)));
  wallet.held += delta;
}

/** The amounts of these ledger references (those that exist). */
export async function findLedgerAmounts(
  executor: SqlExecutor,
  references: string[],
): Promise<{ reference: string; amount: number }[]> {
  if (references.length === 0) return [];
  return executor
    .select({ reference: ledgerEntriesTable.reference, amount: ledgerEntriesTable.amount })
    .from(ledgerEntriesTable)
    .where(sql`${ledgerEntriesTable.reference} in ${idList(references)}`);
}

export interface LedgerMismatch {
  accountId: string;
  balance: number;
  shortfall: number;
  ledgerSum: number;
}

/**
 * The ledger invariant as one query: every wallet's balance minus its shortfall equals the sum of its
 * ledger entries (and no ledger entry belongs to a missing wallet). Empty means consistent.
 */
export async function findLedgerMismatches(
  executor: BillingDatabase | BillingTransaction,
): Promise<LedgerMismatch[]> {
  const result = await executor.execute(sql`
    select coalesce(w.account_id, l.account_id) as "accountId",
           coalesce(w.balance, 0)::bigint as "balance",
           coalesce(w.shortfall, 0)::bigint as "shortfall",
           coalesce(l.total, 0)::bigint as "ledgerSum"
      from wallets w
      full outer join (select account_id, sum(amount) as total from ledger_entries group by account_id) l
        on l.account_id = w.account_id
     where coalesce(w.balance, 0) - coalesce(w.shortfall, 0) <> coalesce(l.total, 0)`);
  type Row = {
    accountId: string;
    balance: string | number;
    shortfall: string | number;
    ledgerSum: string | number;
  };
  return (result.rows as Row[]).map((r) => ({
    accountId: r.accountId,
    balance: Number(r.balance),
    shortfall: Number(r.shortfall),
    ledgerSum: Number(r.ledgerSum),
  }));
}
