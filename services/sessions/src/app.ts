import type { RequestListener } from "node:http";
import express from "express";
import { createServiceApp, errorHandler, type ServiceContext } from "@cgs/shared";
import type { SimulatedBeacons } from "./adapters/simulated-beacons";
import type { SimulatedCloudProvider } from "./adapters/simulated-cloud-provider";
import type { SimulatedStreamingHost } from "./adapters/streaming-host";
import type { SessionsConfig } from "./config";
import type * as schema from "./data/schema";
import type { SessionsAdapters, SessionsDomainDeps } from "./domain/session-deps";
import { pollSession } from "./domain/session-access";
import { withPollFastPath } from "./http/poll-fast-path";
import { deviceRoutes } from "./http/device-routes";
import { sessionRoutes } from "./http/session-routes";
import { simulatorRoutes } from "./http/simulator-routes";

export type SessionsContext = ServiceContext<SessionsConfig, typeof schema>;

export interface SimulatorControls {
  /** The first region's simulated cloud. */
  cloud: SimulatedCloudProvider;
  /** Every simulated region's cloud, by region id. */
  regions: ReadonlyMap<string, SimulatedCloudProvider>;
  streamingHost?: SimulatedStreamingHost;
  /** The simulated regions' latency beacons: listened on by the workers, which then point the regions at them. */
  beacons?: { server: SimulatedBeacons; adopt(base: string): void };
  /** Stops the beacons and every simulated host (the service is shutting down). */
  close(): Promise<void>;
}

export interface SessionsAppDeps extends SessionsAdapters {
  /** Set when the simulators are in use and their control routes may be exposed. */
  simulator?: SimulatorControls;
}

/**
 * The sessions service's HTTP surface: /api/v1/sessions/* behind the service's own JWT check, with the poll
 * served in front of Express when it succeeds.
 */
export function createApp(
  context: SessionsContext,
  deps: SessionsDomainDeps,
  simulator?: SimulatorControls,
): RequestListener {
  // The shared verifier already remembers a verified token until its expiry (at most 60 s).
  const { config, logger, database, verifier } = context;
  const app = createServiceApp({
    logger,
    verifier,
    database,
    routes: (router) => {
      sessionRoutes(deps)(router);
      deviceRoutes(deps)(router);
    },
  });
  const fastPoll = { verifier, logger, poll: (accountId: string) => pollSession(deps, accountId) };
  if (!simulator || !config.SIMULATOR_CONTROL || config.NODE_ENV === "production")
    return withPollFastPath(app, fastPoll);
  const outer = express();
  outer.disable("x-powered-by");
  outer.use(
    "/internal/v1/simulator",
    express.json(),
    simulatorRoutes(simulator.regions, simulator.streamingHost),
  );
  outer.use(app);
  outer.use(errorHandler({ logger }));
  return withPollFastPath(outer, fastPoll);
}
