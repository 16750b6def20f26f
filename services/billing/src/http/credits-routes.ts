import type { Router } from "express";
import { AppError, getAuth, getPrincipal, readIdempotencyKey } from "@cgs/shared";
import { getStorageBilling } from "../domain/storage-billing";
import { createTopup, type TopupDeps } from "../domain/topups";
import { listTransactions, parseCursor, parsePageSize } from "../domain/transactions";
import { getCreditBalance, readWallet } from "../domain/wallets";

function topupBody(body: unknown): { amount: unknown } {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw AppError.validation("amount", "amount is required");
  }
  const unknown = Object.keys(body).filter((k) => k !== "amount");
  if (unknown.length > 0) throw AppError.validation(unknown[0]!, `Unknown field: ${unknown[0]}`);
  if (!("amount" in body)) throw AppError.validation("amount", "amount is required");
  return body as { amount: unknown };
}

/** The wallet endpoints of the public API (behind the service's own JWT check). */
export function creditsRoutes(deps: TopupDeps) {
  return (router: Router) => {
    router.get("/credits/me", async (_req, res) => {
      res.json(await getCreditBalance(deps, getPrincipal(res).identityUserId));
    });

    router.post("/credits/topup", async (req, res) => {
      const { amount } = topupBody(req.body);
      const auth = getAuth(res);
      const checkout = await createTopup(deps, {
        accountId: auth.principal.identityUserId,
        accessToken: auth.accessToken,
        amount: amount as number,
        clientKey: readIdempotencyKey(req),
      });
      res.json(checkout);
    });

    router.get("/credits/transactions", async (req, res) => {
      const unknown = Object.keys(req.query).find((k) => k !== "cursor" && k !== "limit");
      if (unknown) throw AppError.validation(unknown, `Unknown query parameter: ${unknown}`);
      const page = { cursor: parseCursor(req.query.cursor), limit: parsePageSize(req.query.limit) };
      res.json(await listTransactions(deps, getPrincipal(res).identityUserId, page));
    });

    router.get("/billing/storage", async (_req, res) => {
      const wallet = await readWallet(deps, getPrincipal(res).identityUserId);
      res.json(await getStorageBilling(deps, wallet));
    });
  };
}
