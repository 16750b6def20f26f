import type { Request, RequestHandler, Response } from "express";
import { metrics } from "./platform-metrics";

/** A route template for a request, or undefined when the app did not match one. */
export type RouteTemplateOf = (req: Request, res: Response) => string | undefined;

const expressRoute: RouteTemplateOf = (req) => {
  const route = (req as Request & { route?: { path?: unknown } }).route;
  return typeof route?.path === "string" ? req.baseUrl + route.path : undefined;
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
