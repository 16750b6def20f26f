import { Router } from "express";
import { AppError } from "@cgs/shared";
import type { SimulatedCloudProvider } from "../adapters/simulated-cloud-provider";
import type { SimulatedStreamingHost } from "../adapters/streaming-host";

/**
 * Fault injection for local runs and the platform's fault suite: never mounted in production or with a
 * real cloud. Not under /api/v1, so the gateway never exposes it.
 */
export function simulatorRoutes(cloud: SimulatedCloudProvider, host?: SimulatedStreamingHost): Router {
  const router = Router();
  router.post("/faults", (req, res) => {
    const body = (req.body ?? {}) as {
      capacityExhausted?: unknown;
      failNextLaunches?: unknown;
      bootDelayMs?: unknown;
      hostReadyDelayMs?: unknown;
    };
    if (typeof body.capacityExhausted === "boolean") cloud.setCapacityExhausted(body.capacityExhausted);
    if (typeof body.failNextLaunches === "number") cloud.failNextLaunches(body.failNextLaunches);
    if (typeof body.bootDelayMs === "number") cloud.setBootDelay(body.bootDelayMs);
    if (typeof body.hostReadyDelayMs === "number") host?.setReadyDelay(body.hostReadyDelayMs);
    res.status(204).end();
  });
  router.post("/instances/:instanceId/lose", (req, res) => {
    if (!cloud.loseInstance(req.params.instanceId)) throw AppError.notFound("No such simulated instance");
    res.status(204).end();
  });
  router.get("/calls", (_req, res) => {
    res.json({ ...cloud.calls, instances: cloud.instanceCount() });
  });
  return router;
}
