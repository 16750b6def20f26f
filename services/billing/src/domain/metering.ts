import { createEvent, metrics, type EventEnvelope } from "@cgs/shared";
import {
  listExpiredHolds,
  lockActiveHold,
  lockActiveHoldsOf,
  saveHoldRemaining,
  type Hold,
} from "../data/hold-repository";
import {
  chargeMinutesInBulk,
  claimDueSessions,
  insertMeteredSession,
  lockLowCreditSession,
  lockMeteredSession,
  saveMeteredSession,
  type MeteredSession,
  type MinuteCharge,
} from "../data/metered-session-repository";
import {
  findLedgerAmounts,
  lockWallet,
  lockWalletsInOrder,
  postLedgerEntry,
  type BillingTransaction,
  type WalletRow,
} from "../data/wallet-repository";
import type { BillingDeps } from "./billing-deps";
import { releaseHoldInTransaction } from "./start-authorization";
import { ensureWalletCreated } from "./wallets";

export const usageReference = (sessionId: string, minute: number) => `usage:${sessionId}:${minute}`;
const refundReference = (sessionId: string, minute: number) => `usage-refund:${sessionId}:${minute}`;

/**
 * Minutes started in [startedAt, end): every started minute is charged, so a partial one counts (the
 * README's rounding rule); nothing when the end is not after the start.
 */
function minutesStarted(session: MeteredSession, end: Date, minuteMs: number): number {
  const elapsed = end.getTime() - session.startedAt.getTime();
  return elapsed <= 0 ? 0 : Math.ceil(elapsed / minuteMs);
}

interface ChargeContext {
  tx: BillingTransaction;
  deps: BillingDeps;
  session: MeteredSession;
  wallet: WalletRow;
  hold: Hold | undefined;
}

/**
 * Charges minutes chargedMinutes .. upTo-1 of the session. Money comes from the session's own hold
 * first, then from the unheld balance; what the wallet cannot cover is recorded as uncovered instead of
 * driving the balance negative. Each minute's ledger reference is unique, so a retry never charges twice.
 */
async function chargeMinutes(ctx: ChargeContext, upTo: number): Promise<void> {
  const { tx, session, wallet, hold } = ctx;
  const rate = session.ratePerMinute;
  while (session.chargedMinutes < upTo) {
    const minute = session.chargedMinutes;
    const holdRemaining = hold?.remaining ?? 0;
    const available = wallet.balance - (wallet.held - holdRemaining);
    const amount = Math.max(0, Math.min(rate, available));
    if (amount > 0) {
      const fromHold = Math.min(holdRemaining, amount);
      const posted = await postLedgerEntry(tx, wallet, {
        kind: "usage",
        reference: usageReference(session.sessionId, minute),
        amount: -amount,
        heldDelta: -fromHold,
        details: { sessionId: session.sessionId, minute, ratePerMinute: rate, uncovered: rate - amount },
      });
      if (posted.applied && hold) hold.remaining -= fromHold;
    }
    session.uncovered += rate - amount;
    session.chargedMinutes += 1;
  }
  if (hold) await saveHoldRemaining(tx, hold);
}

/** Publishes credits.exhausted once per session when the wallet cannot pay for the session's next minute. */
async function signalExhaustion(ctx: ChargeContext): Promise<void> {
  const { tx, deps, session, wallet, hold } = ctx;
  if (session.status !== "running" || session.exhaustedAt) return;
  const available = wallet.balance - (wallet.held - (hold?.remaining ?? 0));
  if (available >= session.ratePerMinute) return;
  session.exhaustedAt = deps.clock.now();
  const event: EventEnvelope<"credits.exhausted"> = createEvent("credits.exhausted", session.accountId, {
    sessionId: session.sessionId,
    balance: wallet.balance,
    currency: wallet.currency,
  });
  await deps.publisher.publish(tx, event);
  deps.logger.info({ accountId: session.accountId, sessionId: session.sessionId }, "credits exhausted");
}

/**
 * Tells sessions when this running session's credit runs out once that is near: the wallet pays for
 * `minutesLeft` more minutes, so the first unpaid minute starts at startedAt + (charged + minutesLeft) minutes,
 * when metering signals exhaustion and sessions stops it. Sent again whenever the forecast moves (each minute
 * charged, a top-up), and once with null when the wallet covers enough again. Poll shows it as a warning.
 */
async function forecastCredit(ctx: ChargeContext): Promise<void> {
  const { tx, deps, session, wallet, hold } = ctx;
  if (session.status !== "running" || session.exhaustedAt || session.ratePerMinute <= 0) return;
  const available = wallet.balance - (wallet.held - (hold?.remaining ?? 0));
  const minutesLeft = Math.max(0, Math.floor(available / session.ratePerMinute));
  const { minuteMs, lowCreditWarningMinutes } = deps.settings;
  const runsOutAt =
    minutesLeft < lowCreditWarningMinutes
      ? new Date(session.startedAt.getTime() + (session.chargedMinutes + minutesLeft) * minuteMs)
      : null;
  if ((runsOutAt?.getTime() ?? null) === (session.lowCreditRunsOutAt?.getTime() ?? null)) return;
  session.lowCreditRunsOutAt = runsOutAt;
  await deps.publisher.publish(
    tx,
    createEvent("credits.low", session.accountId, {
      sessionId: session.sessionId,
      runsOutAt: runsOutAt ? runsOutAt.toISOString() : null,
      balance: wallet.balance,
      currency: wallet.currency,
    }),
  );
}

async function saveSession(
  tx: BillingTransaction,
  deps: BillingDeps,
  session: MeteredSession,
): Promise<void> {
  const nextMinuteAt = new Date(
    session.startedAt.getTime() + session.chargedMinutes * deps.settings.minuteMs,
  );
  await saveMeteredSession(tx, session, nextMinuteAt);
}

/** Locks wallet and hold (in that order, after the session row) and charges every minute due by `now`. */
async function chargeDue(
  tx: BillingTransaction,
  deps: BillingDeps,
  session: MeteredSession,
  now: Date,
  locked?: { wallet: WalletRow | undefined; hold: Hold | undefined },
) {
  const wallet = locked ? locked.wallet : await lockWallet(tx, session.accountId);
  if (!wallet) return;
  const hold = locked ? locked.hold : await lockActiveHold(tx, session.sessionId);
  const ctx = { tx, deps, session, wallet, hold };
  const due =
    now < session.startedAt
      ? 0
      : minutesStarted(session, new Date(now.getTime() + 1), deps.settings.minuteMs);
  await chargeMinutes(ctx, due);
  await signalExhaustion(ctx);
  await forecastCredit(ctx);
  await saveSession(tx, deps, session);
}

/**
 * After a top-up: the account's session whose credit end sessions was told about gets a fresh forecast at once
 * (most often: it covers enough now, and the warning goes), rather than at its next metered minute.
 */
export async function reforecastAfterCredit(deps: BillingDeps, accountId: string): Promise<void> {
  await deps.db.transaction(async (tx) => {
    const session = await lockLowCreditSession(tx, accountId);
    if (!session) return;
    const wallet = await lockWallet(tx, accountId);
    if (!wallet) return;
    const hold = await lockActiveHold(tx, session.sessionId);
    await forecastCredit({ tx, deps, session, wallet, hold });
    await saveSession(tx, deps, session);
  });
}

export interface SessionStart {
  accountId: string;
  sessionId: string;
  ratePerMinute: number;
  currency: string;
  startedAt: Date;
}

/**
 * Records a session for metering (its wallet too); false when it was already recorded. `ended`: a
 * session that ended without running, recorded so that nothing ever meters it.
 */
async function recordMeteredSession(
  tx: BillingTransaction,
  deps: BillingDeps,
  start: SessionStart,
  ended = false,
): Promise<boolean> {
  await ensureWalletCreated(tx, deps, start.accountId);
  return insertMeteredSession(tx, {
    sessionId: start.sessionId,
    accountId: start.accountId,
    ratePerMinute: start.ratePerMinute,
    currency: start.currency,
    startedAt: start.startedAt,
    nextMinuteAt: start.startedAt,
    ...(ended ? { status: "stopped" as const, stoppedAt: start.startedAt } : {}),
  });
}

/** session.started: metering begins, and the first minute is charged at once. */
export async function startMetering(
  tx: BillingTransaction,
  deps: BillingDeps,
  start: SessionStart,
): Promise<void> {
  if (!(await recordMeteredSession(tx, deps, start))) return;
  const session = await lockMeteredSession(tx, start.sessionId);
  if (session) await chargeDue(tx, deps, session, deps.clock.now());
}

/**
 * session.stopped (or a failure of a started session): charges every minute started before the stop,
 * refunds any minute the loop charged after it (a late stop event), releases what is left of the hold.
 */
export async function stopMetering(
  tx: BillingTransaction,
  deps: BillingDeps,
  start: SessionStart,
  stoppedAt: Date,
): Promise<void> {
  // A stop can arrive before its start (SQS does not order): record the session either way.
  await recordMeteredSession(tx, deps, start);
  const session = await lockMeteredSession(tx, start.sessionId);
  if (!session || session.status === "stopped") return;
  const wallet = await lockWallet(tx, session.accountId);
  if (!wallet) return;
  const hold = await lockActiveHold(tx, session.sessionId);
  const ctx = { tx, deps, session, wallet, hold };
  const total = minutesStarted(session, stoppedAt, deps.settings.minuteMs);
  await chargeMinutes(ctx, total);
  if (session.chargedMinutes > total) await refundMinutes(ctx, total);
  session.status = "stopped";
  session.stoppedAt = stoppedAt;
  await saveSession(tx, deps, session);
  if (hold) await releaseHoldInTransaction(tx, wallet, hold);
}

async function refundMinutes(ctx: ChargeContext, keep: number): Promise<void> {
  const { tx, session, wallet } = ctx;
  const refs = [];
  for (let m = keep; m < session.chargedMinutes; m++) refs.push(usageReference(session.sessionId, m));
  const charged = await findLedgerAmounts(tx, refs);
  for (const entry of charged) {
    const minute = Number(entry.reference.split(":").pop());
    await postLedgerEntry(tx, wallet, {
      kind: "usage_refund",
      reference: refundReference(session.sessionId, minute),
      amount: -entry.amount,
      details: { sessionId: session.sessionId, minute, reason: "charged after the session stopped" },
    });
  }
  session.chargedMinutes = keep;
}

export interface SessionEnd {
  accountId: string;
  sessionId: string;
  /** When it began running (metering start); null when it never ran. */
  startedAt: Date | null;
  endedAt: Date;
  ratePerMinute?: number;
  currency?: string;
}

/**
 * session.failed, or session.stopped of a session that never ran: one that ran is charged to its end;
 * one that never ran is recorded as ended with nothing charged (a late or duplicated session.started can
 * then never start metering it), and its hold goes back at once.
 */
export async function endMetering(tx: BillingTransaction, deps: BillingDeps, end: SessionEnd): Promise<void> {
  const rate = end.ratePerMinute ?? deps.settings.ratePerMinute;
  const currency = end.currency ?? deps.settings.currency;
  const start = { accountId: end.accountId, sessionId: end.sessionId, ratePerMinute: rate, currency };
  const existing = await lockMeteredSession(tx, end.sessionId);
  if (end.startedAt || existing) {
    const startedAt = end.startedAt ?? existing!.startedAt;
    await stopMetering(tx, deps, { ...start, startedAt }, end.endedAt < startedAt ? startedAt : end.endedAt);
    return;
  }
  await recordMeteredSession(tx, deps, { ...start, startedAt: end.endedAt }, true);
  const wallet = await lockWallet(tx, end.accountId);
  const hold = await lockActiveHold(tx, end.sessionId);
  if (wallet && hold) await releaseHoldInTransaction(tx, wallet, hold);
}

/**
 * The tick's common case, charged set-based: exactly one minute due, the session alone on its wallet in
 * the batch, and enough spendable money for this minute and the next (so nothing is uncovered and no
 * exhaustion is signalled). Everything else goes through chargeDue, one session at a time.
 */
function splitSimpleMinutes(
  deps: BillingDeps,
  sessions: MeteredSession[],
  walletByAccount: Map<string, WalletRow>,
  holdBySession: Map<string, Hold>,
  now: Date,
): { simple: MinuteCharge[]; other: MeteredSession[] } {
  const perAccount = new Map<string, number>();
  for (const s of sessions) perAccount.set(s.accountId, (perAccount.get(s.accountId) ?? 0) + 1);
  const simple: MinuteCharge[] = [];
  const other: MeteredSession[] = [];
  const minuteMs = deps.settings.minuteMs;
  for (const session of sessions) {
    const wallet = walletByAccount.get(session.accountId);
    const hold = holdBySession.get(session.sessionId);
    const rate = session.ratePerMinute;
    const due = now < session.startedAt ? 0 : minutesStarted(session, new Date(now.getTime() + 1), minuteMs);
    const holdRemaining = hold?.remaining ?? 0;
    const available = wallet ? wallet.balance - (wallet.held - holdRemaining) : 0;
    if (
      !wallet ||
      perAccount.get(session.accountId) !== 1 ||
      due !== session.chargedMinutes + 1 ||
      rate <= 0 ||
      // Near the end of the credit (or just past a warning), minutes go one by one: they forecast it.
      available < Math.max(2, deps.settings.lowCreditWarningMinutes + 1) * rate ||
      session.lowCreditRunsOutAt !== null
    ) {
      other.push(session);
      continue;
    }
    simple.push({
      sessionId: session.sessionId,
      accountId: session.accountId,
      minute: session.chargedMinutes,
      amount: rate,
      fromHold: Math.min(holdRemaining, rate),
      holdId: hold?.id ?? null,
      currency: wallet.currency,
      balanceAfter: wallet.balance - rate,
      nextMinuteAt: new Date(session.startedAt.getTime() + due * minuteMs),
    });
  }
  return { simple, other };
}

export interface MeteringPass {
  sessions: number;
  batches: number;
}

/**
 * One metering tick: charges every running session whose next minute has started. Sessions are claimed
 * with FOR UPDATE SKIP LOCKED in account order, so replicas split the work, never charge the same
 * session at once, and lock wallets in one order (no deadlocks between replicas).
 */
export async function meterRunningSessions(deps: BillingDeps, maxBatches = 1_000): Promise<MeteringPass> {
  const now = deps.clock.now();
  const pass: MeteringPass = { sessions: 0, batches: 0 };
  const outByCurrency = new Map<string, number>();
  while (pass.batches < maxBatches) {
    const claimed = await deps.db.transaction(async (tx) => {
      const sessions = await claimDueSessions(tx, now, deps.settings.meteringBatchSize);
      if (sessions.length === 0) return 0;
      const wallets = await lockWalletsInOrder(
        tx,
        sessions.map((x) => x.accountId),
      );
      const holds = await lockActiveHoldsOf(
        tx,
        sessions.map((x) => x.sessionId),
      );
      const walletByAccount = new Map(wallets.map((w) => [w.accountId, w]));
      const holdBySession = new Map(holds.map((h) => [h.sessionId, h]));
      const { simple, other } = splitSimpleMinutes(deps, sessions, walletByAccount, holdBySession, now);
      const charged = await chargeMinutesInBulk(tx, simple);
      for (const c of simple)
        if (charged.has(c.sessionId))
          outByCurrency.set(c.currency, (outByCurrency.get(c.currency) ?? 0) + c.amount);
      for (const session of other) {
        await chargeDue(tx, deps, session, now, {
          wallet: walletByAccount.get(session.accountId),
          hold: holdBySession.get(session.sessionId),
        });
      }
      return sessions.length;
    });
    // Counted after the commit, once per currency (postLedgerEntry counts the per-session path's).
    for (const [currency, amount] of outByCurrency) metrics.credits.labels("out", currency).inc(amount);
    outByCurrency.clear();
    pass.batches += 1;
    pass.sessions += claimed;
    if (claimed < deps.settings.meteringBatchSize) break;
  }
  return pass;
}

/** Holds whose session never reported started or failed (a crashed start) go back to the wallet. */
export async function releaseExpiredHolds(deps: BillingDeps): Promise<number> {
  const cutoff = new Date(deps.clock.now().getTime() - deps.settings.holdTtlMs);
  const stale = await listExpiredHolds(deps.db, cutoff, 500);
  let released = 0;
  for (const row of stale) {
    released += await deps.db.transaction(async (tx) => {
      const wallet = await lockWallet(tx, row.accountId);
      const hold = await lockActiveHold(tx, row.sessionId);
      if (!wallet || !hold) return 0;
      await releaseHoldInTransaction(tx, wallet, hold);
      return 1;
    });
  }
  return released;
}
