import { sql } from "drizzle-orm";
import type { LedgerKind } from "./billing-tables";
import type { BillingDatabase } from "./wallet-repository";

/** One line of the player's statement: a ledger entry, or all minute entries of one session together. */
export interface StatementLine {
  /** Position in the statement: the id of the line's first ledger entry (a play line keeps it as it grows). */
  position: number;
  /** The kind of the line's latest entry (for play: `usage` or `usage_refund`). */
  kind: LedgerKind;
  amount: number;
  currency: string;
  balanceAfter: number;
  occurredAt: Date;
  sessionId: string | null;
  minutes: number | null;
  details: Record<string, unknown>;
}

interface Row {
  position: string | number;
  kind: LedgerKind;
  amount: string | number;
  currency: string;
  balance_after: string | number;
  occurred_at: Date | string;
  session_id: string | null;
  minutes: string | number | null;
  details: Record<string, unknown>;
}

/**
 * The account's ledger newest first, minute charges of a session folded into one line, lines older than
 * `before` (a position). Lines are ordered by their first entry, so a running session's line stays where
 * it is while it grows and a page boundary never moves.
 */
export async function readStatement(
  db: BillingDatabase,
  accountId: string,
  options: { before?: number; limit: number },
): Promise<StatementLine[]> {
  const result = await db.execute(sql`
    with lines as (
      select min(id) as position,
             max(id) as last_id,
             sum(amount) as amount,
             case when bool_or(kind in ('usage', 'usage_refund'))
                  then count(*) filter (where kind = 'usage') - count(*) filter (where kind = 'usage_refund')
             end as minutes,
             min(details->>'sessionId') filter (where kind in ('usage', 'usage_refund')) as session_id
        from ledger_entries
       where account_id = ${accountId}
       group by case when kind in ('usage', 'usage_refund') then 'play:' || (details->>'sessionId')
                     else 'entry:' || id::text end
    )
    select l.position, e.kind, l.amount, e.currency, e.balance_after, e.created_at as occurred_at,
           l.session_id, l.minutes, e.details
      from lines l
      join ledger_entries e on e.id = l.last_id
     where ${options.before === undefined ? sql`true` : sql`l.position < ${options.before}`}
     order by l.position desc
     limit ${options.limit}`);
  return (result.rows as unknown as Row[]).map((r) => ({
    position: Number(r.position),
    kind: r.kind,
    amount: Number(r.amount),
    currency: r.currency,
    balanceAfter: Number(r.balance_after),
    occurredAt: new Date(r.occurred_at),
    sessionId: r.session_id,
    minutes: r.minutes === null ? null : Number(r.minutes),
    details: r.details,
  }));
}
