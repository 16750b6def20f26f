import type { Router } from "express";
import { AppError, getPrincipal } from "@cgs/shared";
import { listAccountDevices, removeDevice } from "../domain/devices";
import type { SessionsDomainDeps } from "../domain/session-deps";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** /api/v1/devices: the streaming devices paired with the account's machine. */
export function deviceRoutes(deps: SessionsDomainDeps): (router: Router) => void {
  return (router) => {
    router.get("/devices", async (_req, res) => {
      res.status(200).json({ items: await listAccountDevices(deps, getPrincipal(res).identityUserId) });
    });
    router.delete("/devices/:id", async (req, res) => {
      const id = String(req.params.id);
      if (!UUID.test(id)) throw AppError.validation("id", "id must be a device id (a UUID)");
      await removeDevice(deps, getPrincipal(res).identityUserId, id);
      res.status(204).end();
    });
  };
}
