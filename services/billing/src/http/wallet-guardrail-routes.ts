import type { Router } from "express";
import { z } from "zod";
import { getAuth, getPrincipal, parseBody } from "@cgs/shared";
import { getAutoRecharge, updateAutoRecharge } from "../domain/auto-recharge";
import { createCardSetup, removeCard, type CardDeps } from "../domain/saved-cards";
import { getSpendLimits, updateSpendLimits } from "../domain/spend-limit-settings";
import { MAX_SPEND_LIMIT } from "../domain/spend-limits";

const amount = z.number().int().min(1).max(MAX_SPEND_LIMIT);

const atLeastOne = (patch: object) => Object.keys(patch).length > 0;
const NOTHING = { message: "must name at least one field" };

const autoRechargePatch = z
  .object({ enabled: z.boolean(), threshold: amount, rechargeTo: amount, monthlyLimit: amount })
  .partial()
  .strict()
  .refine(atLeastOne, NOTHING);

const limitsPatch = z
  .object({ daily: amount.nullable(), monthly: amount.nullable() })
  .partial()
  .strict()
  .refine(atLeastOne, NOTHING);

/** Auto-recharge, its saved card and spending limits (the public API, behind the service's own JWT check). */
export function walletGuardrailRoutes(deps: CardDeps) {
  return (router: Router) => {
    router.get("/credits/auto-recharge", async (_req, res) => {
      res.json(await getAutoRecharge(deps, getPrincipal(res).identityUserId));
    });

    router.patch("/credits/auto-recharge", async (req, res) => {
      const patch = parseBody(autoRechargePatch, req.body);
      res.json(await updateAutoRecharge(deps, getPrincipal(res).identityUserId, patch));
    });

    router.post("/credits/payment-method", async (_req, res) => {
      const auth = getAuth(res);
      res.json(
        await createCardSetup(deps, {
          accountId: auth.principal.identityUserId,
          accessToken: auth.accessToken,
        }),
      );
    });

    router.delete("/credits/payment-method", async (_req, res) => {
      await removeCard(deps, getPrincipal(res).identityUserId);
      res.status(204).end();
    });

    router.get("/credits/limits", async (_req, res) => {
      res.json(await getSpendLimits(deps, getPrincipal(res).identityUserId));
    });

    router.patch("/credits/limits", async (req, res) => {
      const patch = parseBody(limitsPatch, req.body);
      res.json(await updateSpendLimits(deps, getPrincipal(res).identityUserId, patch));
    });
  };
}
