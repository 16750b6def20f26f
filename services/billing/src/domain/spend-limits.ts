import { AppError, formatMoney, type SpendLimitRef } from "@cgs/shared";
import type { SpendPeriods, WalletRow } from "../data/wallet-repository";

/**
 * Spending limits: the player caps what play and storage charges may spend per UTC day and per UTC calendar month
 * (the account has no time zone). Play is what they stop: a start is refused when the rest of the day's or month's
 * limit does not cover the start minimum, and a running session is warned, then stopped, when it reaches the
 * limit. Storage charges count toward the limits but are never refused by them.
 */
export type SpendPeriod = SpendLimitRef["period"];

const pad = (n: number) => String(n).padStart(2, "0");

/** The UTC day and month `at` falls in, as the wallet's counters name them. */
export function spendPeriodsAt(at: Date): SpendPeriods {
  const month = `${at.getUTCFullYear()}-${pad(at.getUTCMonth() + 1)}`;
  return { day: `${month}-${pad(at.getUTCDate())}`, month };
}

/** When the period holding `at` ends (exclusive): the next UTC midnight, or the first of the next month. */
export function periodEnd(period: SpendPeriod, at: Date): Date {
  return period === "day"
    ? new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate() + 1))
    : new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1));
}

type SpendingWallet = Pick<
  WalletRow,
  "dailySpendLimit" | "monthlySpendLimit" | "spendDay" | "spentDay" | "spendMonth" | "spentMonth" | "currency"
>;

/** What the wallet has spent in the period holding `at` (0 once a new period has begun). */
export function spentIn(wallet: SpendingWallet, period: SpendPeriod, at: Date): number {
  const keys = spendPeriodsAt(at);
  return period === "day"
    ? wallet.spendDay === keys.day
      ? wallet.spentDay
      : 0
    : wallet.spendMonth === keys.month
      ? wallet.spentMonth
      : 0;
}

export interface Allowance {
  period: SpendPeriod;
  limit: number;
  /** What the limit still allows in the period holding the moment asked about (never below 0). */
  left: number;
  /** When that period ends and the limit allows its whole amount again. */
  resetsAt: Date;
}

/** Each limit the wallet has, with what it still allows at `at`. */
export function allowances(wallet: SpendingWallet, at: Date): Allowance[] {
  const out: Allowance[] = [];
  const limits: [SpendPeriod, number | null][] = [
    ["day", wallet.dailySpendLimit],
    ["month", wallet.monthlySpendLimit],
  ];
  for (const [period, limit] of limits) {
    if (limit === null) continue;
    out.push({
      period,
      limit,
      left: Math.max(0, limit - spentIn(wallet, period, at)),
      resetsAt: periodEnd(period, at),
    });
  }
  return out;
}

/** The limit that allows the least at `at`, if the wallet has any. */
export function tightestAllowance(wallet: SpendingWallet, at: Date): Allowance | undefined {
  let tightest: Allowance | undefined;
  for (const a of allowances(wallet, at)) if (!tightest || a.left < tightest.left) tightest = a;
  return tightest;
}

const PERIOD_WORDS: Record<SpendPeriod, { adjective: string; span: string }> = {
  day: { adjective: "daily", span: "today" },
  month: { adjective: "monthly", span: "this month" },
};

/** "daily spending limit of 20.00 USD": how messages name a limit. */
export function describeLimit(period: SpendPeriod, limit: number, currency: string): string {
  return `${PERIOD_WORDS[period].adjective} spending limit of ${formatMoney(limit, currency)}`;
}

const resetTime = (allowance: Allowance) =>
  allowance.period === "day" ? "00:00 UTC" : `${allowance.resetsAt.toISOString().slice(0, 10)} 00:00 UTC`;

/**
 * A start must fit under every limit: what the day's and the month's limits still allow has to cover the start
 * minimum (`minimum`, the hold), or the start is refused with SPEND_LIMIT_REACHED.
 */
export function assertStartWithinLimits(wallet: SpendingWallet, minimum: number, minutes: number, at: Date) {
  const tightest = tightestAllowance(wallet, at);
  if (!tightest || tightest.left >= minimum) return;
  const { period, limit, left } = tightest;
  throw new AppError(
    "SPEND_LIMIT_REACHED",
    `Your ${describeLimit(period, limit, wallet.currency)} leaves ${formatMoney(left, wallet.currency)} ` +
      `${PERIOD_WORDS[period].span}, less than the ${minutes} minutes (${formatMoney(minimum, wallet.currency)}) a ` +
      `session needs to start; it resets at ${resetTime(tightest)}, or raise it in Billing.`,
  );
}

/** The contract's SpendLimits resource. */
export interface SpendLimitsView {
  daily: number | null;
  monthly: number | null;
  currency: string;
  spentToday: number;
  spentThisMonth: number;
  dayResetsAt: string;
  monthResetsAt: string;
}

export function spendLimitsView(wallet: SpendingWallet, at: Date): SpendLimitsView {
  return {
    daily: wallet.dailySpendLimit,
    monthly: wallet.monthlySpendLimit,
    currency: wallet.currency,
    spentToday: spentIn(wallet, "day", at),
    spentThisMonth: spentIn(wallet, "month", at),
    dayResetsAt: periodEnd("day", at).toISOString(),
    monthResetsAt: periodEnd("month", at).toISOString(),
  };
}

/** Largest limit a player can set, in minor units (anything above is no limit in practice). */
export const MAX_SPEND_LIMIT = 100_000_000;
