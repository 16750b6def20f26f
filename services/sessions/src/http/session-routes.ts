import type { Router } from "express";
import { z } from "zod";
import { getAuth, getPrincipal, parseBody, readIdempotencyKey } from "@cgs/shared";
import { createPairingPin, createVpnKey, getConnectInfo, pollSession } from "../domain/session-access";
import type { SessionsDomainDeps } from "../domain/session-deps";
import { keepPlaying } from "../domain/keep-playing";
import { listRegions } from "../domain/regions";
import { startSession } from "../domain/start-session";
import { stopSession } from "../domain/stop-session";

const REGION_ID = /^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$/;

const startBodySchema = z
  .object({
    region: z
      .string()
      .regex(/^(auto|[a-z]{2}(-[a-z]+)+-[0-9]{1,2})$/, "must be auto or a region id such as us-east-1")
      .optional(),
    regions: z
      .array(z.string().regex(REGION_ID, "must be a region id such as us-east-1"))
      .min(1)
      .max(16)
      .optional(),
    maxRttMs: z.number().int().min(1).max(2_000).optional(),
    rttMs: z
      .record(z.string().regex(REGION_ID, "keys must be region ids"), z.number().min(0).max(60_000))
      .refine((m) => Object.keys(m).length <= 16, "must measure at most 16 regions")
      .optional(),
    queue: z.boolean().optional(),
  })
  .strict();

const pairBodySchema = z
  .object({
    deviceName: z
      .string()
      .min(1)
      .max(40)
      .regex(/^[A-Za-z0-9][A-Za-z0-9 ._-]*$/, "must be letters, digits, spaces, dots, dashes or underscores")
      .optional(),
  })
  .strict();

/** /api/v1/sessions/*: thin handlers over the domain use cases; the service's own JWT check runs first. */
export function sessionRoutes(deps: SessionsDomainDeps): (router: Router) => void {
  return (router) => {
    router.post("/sessions/start", async (req, res) => {
      const { principal, accessToken } = getAuth(res);
      const body = parseBody(startBodySchema, req.body);
      const status = await startSession(deps, {
        accountId: principal.identityUserId,
        accessToken,
        ...body,
        idempotencyKey: readIdempotencyKey(req),
      });
      res.status(200).json(status);
    });
    router.get("/regions", async (_req, res) => {
      res.status(200).json(await listRegions(deps));
    });
    router.post("/sessions/stop", async (_req, res) => {
      res.status(200).json(await stopSession(deps, getPrincipal(res).identityUserId));
    });
    router.get("/sessions/poll", async (_req, res) => {
      res.set("Cache-Control", "no-store");
      res.status(200).json(await pollSession(deps, getPrincipal(res).identityUserId));
    });
    router.post("/sessions/keepalive", async (_req, res) => {
      res.set("Cache-Control", "no-store");
      res.status(200).json(await keepPlaying(deps, getPrincipal(res).identityUserId));
    });
    router.post("/sessions/pair", async (req, res) => {
      const body = parseBody(pairBodySchema, req.body ?? {});
      res.set("Cache-Control", "no-store");
      res.status(200).json(await createPairingPin(deps, getPrincipal(res).identityUserId, body.deviceName));
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
