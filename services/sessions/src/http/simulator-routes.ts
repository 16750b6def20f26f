import { Router } from "express";
import { AppError } from "@cgs/shared";
import type { SimulatedCloudProvider } from "../adapters/simulated-cloud-provider";
import type { SimulatedStreamingHost } from "../adapters/streaming-host";

/**
 * Fault injection for local runs and the platform's fault suite: never mounted in production or with a
 * real cloud. Not under /api/v1, so the gateway never exposes it.
 */
export function simulatorRoutes(
  regions: ReadonlyMap<string, SimulatedCloudProvider>,
  host?: SimulatedStreamingHost,
): Router {
  const router = Router();
  const all = [...regions.values()];
  /** The simulated region holding this instance (every instance id is unique across them). */
  const holding = (instanceId: string) => all.find((cloud) => cloud.instance(instanceId));
  router.post("/faults", (req, res) => {
    const body = (req.body ?? {}) as {
      region?: unknown;
      capacityExhausted?: unknown;
      failNextLaunches?: unknown;
      bootDelayMs?: unknown;
      hostReadyDelayMs?: unknown;
    };
    if (body.region !== undefined && (typeof body.region !== "string" || !regions.has(body.region)))
      throw AppError.validation("region", `region must be one of ${[...regions.keys()].join(", ")}`);
    // One region when named, else every region.
    const clouds = typeof body.region === "string" ? [regions.get(body.region)!] : all;
    for (const cloud of clouds) {
      if (typeof body.capacityExhausted === "boolean") cloud.setCapacityExhausted(body.capacityExhausted);
      if (typeof body.failNextLaunches === "number") cloud.failNextLaunches(body.failNextLaunches);
      if (typeof body.bootDelayMs === "number") cloud.setBootDelay(body.bootDelayMs);
    }
    if (typeof body.hostReadyDelayMs === "number") host?.setReadyDelay(body.hostReadyDelayMs);
    res.status(204).end();
  });
  router.post("/instances/:instanceId/lose", (req, res) => {
    if (!holding(req.params.instanceId)?.loseInstance(req.params.instanceId))
      throw AppError.notFound("No such simulated instance");
    res.status(204).end();
  });
  // A pretend streaming client and input on the instance's display, reported by its host agent's real code.
  router.post("/instances/:instanceId/play", async (req, res) => {
    const body = (req.body ?? {}) as { connected?: unknown; input?: unknown };
    if (body.connected !== undefined && typeof body.connected !== "boolean")
      throw AppError.validation("connected", "connected must be true or false");
    if (body.input !== undefined && typeof body.input !== "boolean")
      throw AppError.validation("input", "input must be true or false");
    const played = await holding(req.params.instanceId)?.hosts?.play(req.params.instanceId, {
      ...(body.connected !== undefined ? { connected: body.connected as boolean } : {}),
      input: body.input === true,
    });
    if (!played) throw AppError.notFound("No simulated instance with a running host agent has that id");
    res.status(200).json(played);
  });
  router.get("/instances", (_req, res) => {
    res.json({
      items: [...regions].flatMap(([region, cloud]) => cloud.listInstances().map((i) => ({ ...i, region }))),
    });
  });
  router.get("/calls", (_req, res) => {
    const calls: Record<string, number> = {};
    for (const cloud of all) {
      for (const [name, n] of Object.entries(cloud.calls)) calls[name] = (calls[name] ?? 0) + n;
    }
    res.json({ ...calls, instances: all.reduce((n, cloud) => n + cloud.instanceCount(), 0) });
  });
  return router;
}
