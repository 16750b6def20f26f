import express, { type Express, type RequestHandler } from "express";
import type { Logger } from "pino";
import { errorHandler, notFoundHandler } from "../errors";
import { healthRoutes, type ReadinessCheck } from "./health-routes";
import { loggingMiddleware } from "./logging-middleware";
import { metricsMiddleware, type RouteTemplateOf } from "../metrics/metrics-middleware";

export interface BaseAppOptions {
  logger: Logger;
  readiness?: ReadinessCheck[];
  /** JSON body limit (bytes or "100kb"); false mounts no JSON parser (the gateway parses per route). */
  jsonLimit?: string | number | false;
  /** Express "trust proxy" setting; loopback by default. */
  trustProxy?: boolean | number | string | string[];
  /** The route template a request matched, for metric labels; defaults to Express's matched route. */
  metricsRoute?: RouteTemplateOf;
  /** Runs before /healthz and /readyz, e.g. to hide the readiness probe from the public origin. */
  beforeProbes?: RequestHandler;
}

type TrustFn = (address: string, hop: number) => boolean;
const TRUST_MEMO_SIZE = 1024;
/** Hops remembered; a longer X-Forwarded-For chain (a client can send any) is checked afresh past them. */
const TRUST_MEMO_HOPS = 4;

/**
 * Express's compiled "trust proxy" check, remembered per address and hop: req.ip and req.protocol ask it on every
 * request, and each answer parsed the address again (ipaddr.js, about 1 % of the gateway's CPU). Peers are the load
 * balancer's few addresses; past TRUST_MEMO_SIZE distinct ones a hop's memo starts over.
 */
function rememberedTrust(trust: TrustFn): TrustFn {
  const byHop: Map<string, boolean>[] = [];
  return (address, hop) => {
    if (hop >= TRUST_MEMO_HOPS) return trust(address, hop);
    const memo = (byHop[hop] ??= new Map());
    let trusted = memo.get(address);
    if (trusted === undefined) {
      if (memo.size >= TRUST_MEMO_SIZE) memo.clear();
      trusted = trust(address, hop);
      memo.set(address, trusted);
    }
    return trusted;
  };
}

/**
 * The front half every process shares: no X-Powered-By, request id + access log, /healthz, /readyz,
 * a size-limited JSON parser. Mount routes on the result, then call installErrorHandlers(app, {logger}).
 */
export function createBaseApp({
  logger,
  readiness = [],
  jsonLimit = "100kb",
  trustProxy = "loopback",
  metricsRoute,
  beforeProbes,
}: BaseAppOptions): Express {
  const app = express();
  app.disable("x-powered-by");
  app.set("trust proxy", trustProxy);
  app.set("trust proxy fn", rememberedTrust(app.get("trust proxy fn") as TrustFn));
  app.set("query parser", "simple");
  app.use(...frontHandlers({ logger, metricsRoute }));
  if (beforeProbes) app.use(beforeProbes);
  app.use(healthRoutes(readiness));
  if (jsonLimit !== false) app.use(express.json({ limit: jsonLimit }));
  return app;
}

/**
 * What every request passes first, in order: its metrics (count and duration by route template) and its request
 * id with the access log line. createBaseApp mounts them; a listener that answers some requests outside Express
 * (the gateway's API) runs the same two.
 */
export function frontHandlers({
  logger,
  metricsRoute,
}: Pick<BaseAppOptions, "logger" | "metricsRoute">): RequestHandler[] {
  return [metricsMiddleware(metricsRoute), loggingMiddleware(logger)];
}

/** Unknown routes -> 404 NOT_FOUND, then the one error middleware. Call after mounting every route. */
export function installErrorHandlers(app: Express, { logger }: { logger: Logger }): void {
  app.use(notFoundHandler());
  app.use(errorHandler({ logger }));
}
