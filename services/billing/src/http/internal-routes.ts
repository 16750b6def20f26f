import { Router } from "express";
import { z } from "zod";
import { AppError, getPrincipal, parseBody } from "@cgs/shared";
import type { BillingDeps } from "../domain/billing-deps";
import { authorizeStart, releaseStartAuthorization } from "../domain/start-authorization";

const startAuthorizationBody = z
  .object({
    sessionId: z.string().min(1).max(200),
    ratePerMinute: z.number().int().min(1),
    currency: z.string().regex(/^[A-Z]{3}$/),
  })
  .strict();

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** /internal/v1: called by sessions with the user's own token; never exposed by the gateway. */
export function internalRoutes(deps: BillingDeps): Router {
  const router = Router();
  router.post("/start-authorizations", async (req, res) => {
    const body = parseBody(startAuthorizationBody, req.body);
    res.json(await authorizeStart(deps, getPrincipal(res).identityUserId, body));
  });
  router.post("/start-authorizations/:id/release", async (req, res) => {
    const id = req.params.id ?? "";
    if (!UUID.test(id)) throw AppError.notFound("Start authorization not found");
    await releaseStartAuthorization(deps, getPrincipal(res).identityUserId, id);
    res.status(204).end();
  });
  return router;
}
