import express, { Router } from "express";
import { getPrincipal, HEADERS } from "@cgs/shared";
import type { AccountUseCases, AuthMethod } from "../domain/account-use-cases";

// The gateway overwrites any client value of this header; a direct caller of the service is a bearer caller.
const authMethodOf = (value: string | string[] | undefined): AuthMethod =>
  value === "cookie" ? "cookie" : "bearer";

/** /api/v1 routes of the accounts service (behind requireAuth). */
export function accountRoutes(useCases: AccountUseCases): Router {
  const router = Router();
  // PATCH accepts RFC 7396's media type as well as plain JSON (the base app parses only application/json).
  const mergePatchJson = express.json({ type: "application/merge-patch+json", limit: "16kb" });

  router.get("/settings", async (_req, res) => {
    res.json(await useCases.readSettings(getPrincipal(res)));
  });

  router.patch("/settings", mergePatchJson, async (req, res) => {
    res.json(await useCases.updateSettings(getPrincipal(res), req.body));
  });

  router.get("/session", async (req, res) => {
    res.setHeader("Cache-Control", "no-store");
    res.json(
      await useCases.describeIdentity(getPrincipal(res), authMethodOf(req.headers[HEADERS.authMethod])),
    );
  });

  router.delete("/account/delete", async (_req, res) => {
    res.status(202).json(await useCases.requestDeletion(getPrincipal(res)));
  });

  return router;
}

/** /internal/v1 routes other services call with the end user's own token; the gateway never exposes them. */
export function internalAccountRoutes(useCases: AccountUseCases): Router {
  const router = Router();
  router.get("/accounts/me", async (_req, res) => {
    res.setHeader("Cache-Control", "no-store");
    res.json(await useCases.internalView(getPrincipal(res)));
  });
  return router;
}
