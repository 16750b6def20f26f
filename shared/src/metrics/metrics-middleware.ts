import type { Request, RequestHandler, Response } from "express";
import { metrics } from "./platform-metrics";

/** A route template for a request, or undefined when the app did not match one. */
export type RouteTemplateOf = (req: Request, res: Response) => string | undefined;

interface RouteLocals {
  routeBase?: string;
}

// Express resets req.baseUrl when an error leaves a router, so routers remember their mount path.
const expressRoute: RouteTemplateOf = (req, res) => {
  const route = (req as Request & { route?: { path?: unknown } }).route;
  if (typeof route?.path !== "string") return undefined;
  return ((res.locals as RouteLocals).routeBase ?? req.baseUrl) + route.path;
};

/** Mount first on a Router: remembers its mount path so an error answered later is still labelled by template. */
export const rememberRouteBase: RequestHandler = (req, res, next) => {
  (res.locals as RouteLocals).routeBase = req.baseUrl;
  next();
};

const QUIET_PATHS = new Set(["/healthz", "/readyz"]);

/**
 * Request count and duration per method, route template and status. Unmatched paths count as
 * "unmatched" so a scanner cannot mint series; probes are not counted.
 */
export function metricsMiddleware(routeOf: RouteTemplateOf = expressRoute): RequestHandler {
  const { httpRequests, httpDuration } = metrics;
  return (req, res, next) => {
    const started = performance.now();
    res.once("finish", () => {
      const route = routeOf(req, res) ?? expressRoute(req, res) ?? "unmatched";
      if (QUIET_PATHS.has(route)) return;
      const method = req.method;
      httpRequests.labels(method, route, String(res.statusCode)).inc();
      httpDuration.labels(method, route).observe((performance.now() - started) / 1000);
    });
    next();
  };
}
