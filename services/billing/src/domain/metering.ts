import { createEvent, metrics, type EventEnvelope, type SpendLimitRef } from "@cgs/shared";
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
  lockMeteredSession,
  lockRunningSessionsOf,
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
import { rechargeIfCrossed } from "./auto-recharge";
import type { BillingDeps } from "./billing-deps";
import { allowances, spendPeriodsAt, tightestAllowance, type Allowance } from "./spend-limits";
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

/** Why a minute could not be paid in full: the balance ran dry, or a spending limit was reached. */
type Shortfall = { reason: "balance" } | { reason: "spend_limit"; allowance: Allowance };

/**
 * Charges minutes chargedMinutes .. upTo-1 of the session. Money comes from the session's own hold first, then
 * from the unheld balance, and never past a spending limit: what the wallet cannot cover, or the limit does not
 * allow, is recorded as uncovered instead (the balance never goes negative, spending never passes the limit).
 * Each minute's ledger reference is unique, so a retry never charges twice. Returns why the first minute that was
 * not paid in full was not, if one was not.
 */
async function chargeMinutes(ctx: ChargeContext, upTo: number): Promise<Shortfall | undefined> {
  const { tx, deps, session, wallet, hold } = ctx;
  const rate = session.ratePerMinute;
  const now = deps.clock.now();
  const spending = spendPeriodsAt(now);
  let short: Shortfall | undefined;
  while (session.chargedMinutes < upTo) {
    const minute = session.chargedMinutes;
    const holdRemaining = hold?.remaining ?? 0;
    const available = wallet.balance - (wallet.held - holdRemaining);
    const allowance = tightestAllowance(wallet, now);
    const payable = Math.min(available, allowance?.left ?? Infinity);
    const amount = Math.max(0, Math.min(rate, payable));
    if (amount < rate && !short) {
      short =
        allowance && allowance.left < available
          ? { reason: "spend_limit", allowance }
          : { reason: "balance" };
    }
    if (amount > 0) {
      const fromHold = Math.min(holdRemaining, amount);
      const posted = await postLedgerEntry(tx, wallet, {
        kind: "usage",
        reference: usageReference(session.sessionId, minute),
        amount: -amount,
        heldDelta: -fromHold,
        spending,
        details: { sessionId: session.sessionId, minute, ratePerMinute: rate, uncovered: rate - amount },
      });
      if (posted.applied && hold) hold.remaining -= fromHold;
    }
    session.uncovered += rate - amount;
    session.chargedMinutes += 1;
  }
  if (hold) await saveHoldRemaining(tx, hold);
  return short;
}

const limitRef = (a: Allowance): SpendLimitRef => ({ period: a.period, amount: a.limit });

/**
 * A minute started that could not be paid in full: credits.exhausted is published once per session, naming it and
 * why (the balance, or the spending limit reached), and sessions stops that session. This is the moment the
 * forecast announced (the start of the first minute not paid for), not a minute before it.
 */
async function signalStop(ctx: ChargeContext, short: Shortfall | undefined): Promise<void> {
  const { tx, deps, session, wallet } = ctx;
  if (!short || session.status !== "running" || session.exhaustedAt) return;
  session.exhaustedAt = deps.clock.now();
  const event: EventEnvelope<"credits.exhausted"> = createEvent("credits.exhausted", session.accountId, {
    sessionId: session.sessionId,
    balance: wallet.balance,
    currency: wallet.currency,
    reason: short.reason,
    ...(short.reason === "spend_limit" ? { spendLimit: limitRef(short.allowance) } : {}),
  });
  await deps.publisher.publish(tx, event);
  deps.logger.info(
    { accountId: session.accountId, sessionId: session.sessionId, reason: short.reason },
    "session can no longer be paid for",
  );
}

/** When the first minute the session cannot have starts, and why; undefined while that is far off. */
interface StopForecast {
  runsOutAt: Date;
  /** `balance`, or the period of the spending limit that ends it (the metered_sessions column's values). */
  reason: "balance" | Allowance["period"];
  allowance?: Allowance;
}

function forecastOf(ctx: ChargeContext): StopForecast | undefined {
  const { deps, session, wallet, hold } = ctx;
  const { minuteMs, lowCreditWarningMinutes } = deps.settings;
  const rate = session.ratePerMinute;
  const startOf = (minutes: number) => new Date(session.startedAt.getTime() + minutes * minuteMs);
  const available = wallet.balance - (wallet.held - (hold?.remaining ?? 0));
  let best: StopForecast & { minutes: number } = {
    minutes: Math.max(0, Math.floor(available / rate)),
    reason: "balance",
    runsOutAt: new Date(0),
  };
  // Limits are read as they stand when the next minute starts; one that resets before it would stop the session
  // (midnight UTC, the first of the month) stops nothing. A limit that ends play when the balance does wins.
  for (const allowance of allowances(wallet, startOf(session.chargedMinutes))) {
    const minutes = Math.floor(allowance.left / rate);
    if (startOf(session.chargedMinutes + minutes) >= allowance.resetsAt) continue;
    if (minutes <= best.minutes)
      best = { minutes, reason: allowance.period, allowance, runsOutAt: new Date(0) };
  }
  if (best.minutes >= lowCreditWarningMinutes) return undefined;
  return { ...best, runsOutAt: startOf(session.chargedMinutes + best.minutes) };
}

/**
 * Tells sessions when this running session will be stopped once that is near: the first minute the wallet cannot
 * pay (or a spending limit does not allow) starts at startedAt + (charged + minutes left) minutes, when metering
 * signals the stop. Sent again whenever the forecast moves (each minute charged, a top-up, a changed limit), and
 * once with null when enough is left again. Poll shows it as a warning.
 */
async function forecastStop(ctx: ChargeContext): Promise<void> {
  const { tx, deps, session, wallet } = ctx;
  if (session.status !== "running" || session.exhaustedAt || session.ratePerMinute <= 0) return;
  const forecast = forecastOf(ctx);
  const runsOutAt = forecast?.runsOutAt ?? null;
  const reason = forecast?.reason ?? null;
  if (
    (runsOutAt?.getTime() ?? null) === (session.lowCreditRunsOutAt?.getTime() ?? null) &&
    reason === session.lowCreditReason
  ) {
    return;
  }
  session.lowCreditRunsOutAt = runsOutAt;
  session.lowCreditReason = reason;
  await deps.publisher.publish(
    tx,
    createEvent("credits.low", session.accountId, {
      sessionId: session.sessionId,
      runsOutAt: runsOutAt ? runsOutAt.toISOString() : null,
      balance: wallet.balance,
      currency: wallet.currency,
      reason: forecast?.allowance ? "spend_limit" : "balance",
      ...(forecast?.allowance ? { spendLimit: limitRef(forecast.allowance) } : {}),
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
  const balanceBefore = wallet.balance;
  const short = await chargeMinutes(ctx, due);
  await signalStop(ctx, short);
  await rechargeIfCrossed(tx, deps, wallet, balanceBefore);
  await forecastStop(ctx);
  await saveSession(tx, deps, session);
}

/**
 * After a credit or a changed spending limit: the account's running sessions get a fresh forecast at once (a warning
 * appears, moves or goes), rather than at their next metered minute. Locks sessions before the wallet, as metering.
 */
export async function reforecastAccount(deps: BillingDeps, accountId: string): Promise<void> {
  await deps.db.transaction(async (tx) => {
    const sessions = await lockRunningSessionsOf(tx, accountId);
    if (sessions.length === 0) return;
    const wallet = await lockWallet(tx, accountId);
    if (!wallet) return;
    for (const session of sessions) {
      const hold = await lockActiveHold(tx, session.sessionId);
      await forecastStop({ tx, deps, session, wallet, hold });
      await saveSession(tx, deps, session);
    }
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
  const balanceBefore = wallet.balance;
  await chargeMinutes(ctx, total);
  if (session.chargedMinutes > total) await refundMinutes(ctx, total);
  await rechargeIfCrossed(tx, deps, wallet, balanceBefore);
  session.status = "stopped";
  session.stoppedAt = stoppedAt;
  await saveSession(tx, deps, session);
  if (hold) await releaseHoldInTransaction(tx, wallet, hold);
}

async function refundMinutes(ctx: ChargeContext, keep: number): Promise<void> {
  const { tx, deps, session, wallet } = ctx;
  const spending = spendPeriodsAt(deps.clock.now());
  const refs = [];
  for (let m = keep; m < session.chargedMinutes; m++) refs.push(usageReference(session.sessionId, m));
  const charged = await findLedgerAmounts(tx, refs);
  for (const entry of charged) {
    const minute = Number(entry.reference.split(":").pop());
    await postLedgerEntry(tx, wallet, {
      kind: "usage_refund",
      reference: refundReference(session.sessionId, minute),
      amount: -entry.amount,
      spending,
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
 * The tick's common case, charged set-based: exactly one minute due, the session alone on its wallet in the batch,
 * money and spending limits far from their end (so nothing is uncovered, no stop or warning is due), and no
 * auto-recharge threshold crossed by this minute. Everything else goes through chargeDue, one session at a time.
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
    const allowed = wallet ? (tightestAllowance(wallet, now)?.left ?? Infinity) : 0;
    const margin = Math.max(2, deps.settings.lowCreditWarningMinutes + 1) * rate;
    if (
      !wallet ||
      perAccount.get(session.accountId) !== 1 ||
      due !== session.chargedMinutes + 1 ||
      rate <= 0 ||
      // Near the end of the credit or of a limit (or just past a warning), minutes go one by one: they forecast it.
      Math.min(available, allowed) < margin ||
      session.lowCreditRunsOutAt !== null ||
      (wallet.autoRechargeEnabled &&
        wallet.autoRechargeThreshold !== null &&
        wallet.balance - rate < wallet.autoRechargeThreshold)
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
      const charged = await chargeMinutesInBulk(tx, simple, spendPeriodsAt(now));
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
