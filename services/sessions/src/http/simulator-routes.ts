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
  // A pretend streaming client and input on the instance's display, reported by its host agent's real code.
  router.post("/instances/:instanceId/play", async (req, res) => {
    const body = (req.body ?? {}) as { connected?: unknown; input?: unknown };
    if (body.connected !== undefined && typeof body.connected !== "boolean")
      throw AppError.validation("connected", "connected must be true or false");
    if (body.input !== undefined && typeof body.input !== "boolean")
      throw AppError.validation("input", "input must be true or false");
    const played = await cloud.hosts?.play(req.params.instanceId, {
      ...(body.connected !== undefined ? { connected: body.connected as boolean } : {}),
      input: body.input === true,
    });
    if (!played) throw AppError.notFound("No simulated instance with a running host agent has that id");
    res.status(200).json(played);
  });
  router.get("/instances", (_req, res) => {
    res.json({ items: cloud.listInstances() });
  });
  router.get("/calls", (_req, res) => {
    res.json({ ...cloud.calls, instances: cloud.instanceCount() });
  });
  return router;
}
