import type { Request, Router } from "express";
import { z } from "zod";
import { AppError, getAuth, getPrincipal } from "@cgs/shared";
import { createPairingPin, createVpnKey, getConnectInfo, pollSession } from "../domain/session-access";
import type { SessionsDomainDeps } from "../domain/session-deps";
import { startSession } from "../domain/start-session";
import { stopSession } from "../domain/stop-session";

const startBodySchema = z
  .object({
    region: z
      .string()
      .regex(/^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$/, "must be a region name such as us-east-1")
      .optional(),
  })
  .strict();

function parseStartBody(req: Request): { region?: string } {
  const body: unknown = req.body ?? {};
  const parsed = startBodySchema.safeParse(body);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  if (issue?.code === "unrecognized_keys")
    throw AppError.validation(issue.keys[0] ?? "body", "Unknown field");
  const field = issue?.path.join(".") || "body";
  throw AppError.validation(field, `${field} ${issue?.message ?? "is invalid"}`);
}

function idempotencyKey(req: Request): string | undefined {
  const key = req.get("idempotency-key");
  if (key === undefined) return undefined;
  if (key.length < 1 || key.length > 255) {
    throw AppError.validation("Idempotency-Key", "Idempotency-Key must be 1 to 255 characters");
  }
  return key;
}

/** /api/v1/sessions/*: thin handlers over the domain use cases; the service's own JWT check runs first. */
export function sessionRoutes(deps: SessionsDomainDeps): (router: Router) => void {
  return (router) => {
    router.post("/sessions/start", async (req, res) => {
      const { principal, accessToken } = getAuth(res);
      const body = parseStartBody(req);
      const status = await startSession(deps, {
        accountId: principal.identityUserId,
        accessToken,
        region: body.region,
        idempotencyKey: idempotencyKey(req),
      });
      res.status(200).json(status);
    });
    router.post("/sessions/stop", async (_req, res) => {
      res.status(200).json(await stopSession(deps, getPrincipal(res).identityUserId));
    });
    router.get("/sessions/poll", async (_req, res) => {
      res.set("Cache-Control", "no-store");
      res.status(200).json(await pollSession(deps, getPrincipal(res).identityUserId));
    });
    router.post("/sessions/pair", async (_req, res) => {
      res.set("Cache-Control", "no-store");
      res.status(200).json(await createPairingPin(deps, getPrincipal(res).identityUserId));
    });
    router.get("/sessions/connect", async (_req, res) => {
      res.status(200).json(await getConnectInfo(deps, getPrincipal(res).identityUserId));
    });
    router.post("/sessions/vpn-key", async (_req, res) => {
      res.set("Cache-Control", "no-store");
      res.status(200).json(await createVpnKey(deps, getPrincipal(res).identityUserId));
    });
  };
}
