import { AppError } from "@cgs/shared";
import type { LedgerKind } from "../data/billing-tables";
import { readStatement, type StatementLine } from "../data/ledger-repository";
import type { BillingDeps } from "./billing-deps";

export type TransactionType = "topup" | "play" | "storage" | "refund" | "dispute" | "adjustment";

/** The contract's Transaction (shared/openapi.json). */
export interface Transaction {
  id: string;
  type: TransactionType;
  amount: number;
  currency: string;
  balanceAfter: number;
  occurredAt: string;
  description: string;
  sessionId: string | null;
  paymentId: string | null;
  minutes: number | null;
}

export interface TransactionPage {
  items: Transaction[];
  nextCursor: string | null;
}

const TYPE_OF: Record<LedgerKind, TransactionType> = {
  topup: "topup",
  usage: "play",
  usage_refund: "play",
  storage: "storage",
  refund: "refund",
  dispute_lost: "dispute",
  adjustment: "adjustment",
};

export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 200;

const encodeCursor = (position: number) => Buffer.from(`p:${position}`).toString("base64url");

function decodeCursor(cursor: string): number {
  const match = /^p:(\d{1,18})$/.exec(Buffer.from(cursor, "base64url").toString("utf8"));
  const position = match ? Number(match[1]) : NaN;
  if (!Number.isSafeInteger(position) || position < 1) {
    throw AppError.validation("cursor", "cursor is not a cursor this endpoint returned");
  }
  return position;
}

export function parsePageSize(value: unknown): number {
  if (value === undefined) return DEFAULT_PAGE_SIZE;
  const n = typeof value === "string" && /^\d+$/.test(value) ? Number(value) : NaN;
  if (!Number.isInteger(n) || n < 1 || n > MAX_PAGE_SIZE) {
    throw AppError.validation("limit", `limit must be an integer from 1 to ${MAX_PAGE_SIZE}`);
  }
  return n;
}

export function parseCursor(value: unknown): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "string" || value.length < 1 || value.length > 200) {
    throw AppError.validation("cursor", "cursor must be 1 to 200 characters");
  }
  return decodeCursor(value);
}

const detail = (line: StatementLine, key: string) => {
  const v = line.details[key];
  return typeof v === "string" && v ? v : null;
};

function describe(line: StatementLine, type: TransactionType): string {
  switch (type) {
    case "play":
      return `Play, ${line.minutes ?? 0} min`;
    case "topup": {
      const settled = Number(line.details.shortfallSettled ?? 0);
      const what = line.details.autoRecharge === true ? "Auto-recharge" : "Top-up";
      return settled > 0 ? `${what} (${settled} settled an unpaid balance)` : what;
    }
    case "storage": {
      const tier = detail(line, "tier");
      return tier ? `Storage, ${tier} tier` : "Storage";
    }
    case "refund":
      return "Refund of a top-up";
    case "dispute":
      return "Disputed top-up lost";
    case "adjustment":
      return "Adjustment";
  }
}

function toTransaction(line: StatementLine): Transaction {
  const type = TYPE_OF[line.kind];
  return {
    id: String(line.position),
    type,
    amount: line.amount,
    currency: line.currency,
    balanceAfter: line.balanceAfter,
    occurredAt: line.occurredAt.toISOString(),
    description: describe(line, type),
    sessionId: type === "play" ? line.sessionId : null,
    paymentId: type === "play" ? null : (detail(line, "paymentId") ?? detail(line, "checkoutSessionId")),
    minutes: type === "play" ? (line.minutes ?? 0) : null,
  };
}

/** GET /credits/transactions: one page of the ledger, newest first; the cursor is the last line's position. */
export async function listTransactions(
  deps: BillingDeps,
  accountId: string,
  page: { cursor?: number; limit: number },
): Promise<TransactionPage> {
  const lines = await readStatement(deps.db, accountId, { before: page.cursor, limit: page.limit + 1 });
  const items = lines.slice(0, page.limit).map(toTransaction);
  const last = lines[page.limit - 1];
  return { items, nextCursor: lines.length > page.limit && last ? encodeCursor(last.position) : null };
}
