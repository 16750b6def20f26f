import { randomUUID } from "node:crypto";
import type { JwtVerifier } from "@cgs/shared";
import { bearerOf, startJsonServer, type HttpStandIn } from "./http-stand-in";

export interface StandInHold {
  authorizationId: string;
  accountId: string;
  sessionId: string;
  amount: number;
  released: boolean;
}

export interface BillingStandIn extends HttpStandIn {
  /** Balance (minor units) of an account; accounts not set have `defaultBalance`. */
  setBalance(accountId: string, balance: number): void;
  holds: StandInHold[];
  /** While set, every call answers 503 (billing down). */
  down: boolean;
  /** While set, a start authorization is placed but its answer is lost (503 after the hold exists). */
  loseAuthorizationAnswers: boolean;
  /** Starts of this account are refused as billing refuses them at a spending limit (409), with this message. */
  refuseAtSpendLimit(accountId: string, message: string): void;
}

/**
 * A stand-in for billing's internal start authorization, honouring the contract in the services brief:
 * POST /internal/v1/start-authorizations → 200 {authorizationId, holdAmount, storage}, 402 or 409, and
 * POST /internal/v1/start-authorizations/{id}/release → 204. It verifies the forwarded JWT like the real
 * service. Billing is a separate deployable; its own tests cover the real implementation.
 */
export async function startBillingStandIn(options: {
  verifier: JwtVerifier;
  defaultBalance?: number;
  storage?: { tier: string; sizeGb: number };
}): Promise<BillingStandIn> {
  const balances = new Map<string, number>();
  const spendLimitReached = new Map<string, string>();
  const holds: StandInHold[] = [];
  const storage = options.storage ?? { tier: "basic", sizeGb: 100 };
  const state = { down: false, loseAuthorizationAnswers: false };
  const server = await startJsonServer(async (req) => {
    if (state.down) return { status: 503, body: { error: "UNAVAILABLE", message: "billing is down" } };
    let accountId: string;
    try {
      accountId = (await options.verifier.verify(bearerOf(req.headers) ?? "")).identityUserId;
    } catch {
      return { status: 401, body: { error: "UNAUTHENTICATED", message: "Missing or invalid bearer token" } };
    }
    if (req.method === "POST" && req.path === "/internal/v1/start-authorizations") {
      const body = req.body as { sessionId?: string; ratePerMinute?: number; currency?: string };
      if (typeof body.sessionId !== "string" || typeof body.ratePerMinute !== "number" || !body.currency) {
        return { status: 400, body: { error: "VALIDATION_ERROR", message: "body is invalid" } };
      }
      const limited = spendLimitReached.get(accountId);
      if (limited) return { status: 409, body: { error: "SPEND_LIMIT_REACHED", message: limited } };
      const holdAmount = body.ratePerMinute * 15;
      const held = holds
        .filter((h) => h.accountId === accountId && !h.released)
        .reduce((sum, h) => sum + h.amount, 0);
      const balance = balances.get(accountId) ?? options.defaultBalance ?? 10_000;
      if (balance - held < holdAmount) {
        return {
          status: 402,
          body: { error: "INSUFFICIENT_CREDITS", message: "The balance does not cover 15 minutes of play" },
        };
      }
      const hold = {
        authorizationId: randomUUID(),
        accountId,
        sessionId: body.sessionId,
        amount: holdAmount,
        released: false,
      };
      holds.push(hold);
      if (state.loseAuthorizationAnswers) {
        return { status: 503, body: { error: "UNAVAILABLE", message: "the answer was lost" } };
      }
      return { status: 200, body: { authorizationId: hold.authorizationId, holdAmount, storage } };
    }
    const release = /^\/internal\/v1\/start-authorizations\/([^/]+)\/release$/.exec(req.path);
    if (req.method === "POST" && release) {
      const hold = holds.find((h) => h.authorizationId === release[1] && h.accountId === accountId);
      if (!hold) return { status: 404, body: { error: "NOT_FOUND", message: "no such authorization" } };
      hold.released = true;
      return { status: 204 };
    }
    return { status: 404, body: { error: "NOT_FOUND", message: "Route not found" } };
  });
  return {
    ...server,
    holds,
    setBalance: (accountId, balance) => balances.set(accountId, balance),
    refuseAtSpendLimit: (accountId, message) => spendLimitReached.set(accountId, message),
    get down() {
      return state.down;
    },
    set down(value: boolean) {
      state.down = value;
    },
    get loseAuthorizationAnswers() {
      return state.loseAuthorizationAnswers;
    },
    set loseAuthorizationAnswers(value: boolean) {
      state.loseAuthorizationAnswers = value;
    },
  };
}
