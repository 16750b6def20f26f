import type { Router } from "express";
import { z } from "zod";
import { getAuth, getPrincipal, parseBody, readIdempotencyKey } from "@cgs/shared";
import { createPairingPin, createVpnKey, getConnectInfo, pollSession } from "../domain/session-access";
import type { SessionsDomainDeps } from "../domain/session-deps";
import { keepPlaying } from "../domain/keep-playing";
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
        region: body.region,
        idempotencyKey: readIdempotencyKey(req),
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
