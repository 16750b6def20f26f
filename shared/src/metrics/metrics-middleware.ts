import type { IncomingMessage, ServerResponse } from "node:http";
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
const STARTED = Symbol("cgs.metrics.started");

type Timed = ServerResponse & { [STARTED]?: number; req: IncomingMessage };
interface Recorders {
  inc(): void;
  observe(seconds: number): void;
}

/**
 * Request count and duration per method, route template and status. Unmatched paths count as
 * "unmatched" so a scanner cannot mint series; probes are not counted. The hot path allocates nothing
 * once a (route, method, status) has been seen: one shared finish listener, cached label children.
 */
export function metricsMiddleware(routeOf: RouteTemplateOf = expressRoute): RequestHandler {
  const { httpRequests, httpDuration } = metrics;
  const children = new Map<string, Map<string, Map<number, Recorders>>>();
  const recordersFor = (route: string, method: string, status: number): Recorders => {
    let byMethod = children.get(route);
    if (!byMethod) children.set(route, (byMethod = new Map()));
    let byStatus = byMethod.get(method);
    if (!byStatus) byMethod.set(method, (byStatus = new Map()));
    let recorders = byStatus.get(status);
    if (!recorders) {
      const counter = httpRequests.labels(method, route, String(status));
      const histogram = httpDuration.labels(method, route);
      recorders = { inc: () => counter.inc(), observe: (s) => histogram.observe(s) };
      byStatus.set(status, recorders);
    }
    return recorders;
  };

  function onFinish(this: Timed): void {
    const req = this.req as Request;
    const res = this as unknown as Response;
    const route = routeOf(req, res) ?? expressRoute(req, res) ?? "unmatched";
    if (QUIET_PATHS.has(route)) return;
    const recorders = recordersFor(route, req.method, this.statusCode);
    recorders.inc();
    recorders.observe((performance.now() - (this[STARTED] ?? 0)) / 1000);
  }

  return (_req, res, next) => {
    (res as unknown as Timed)[STARTED] = performance.now();
    // A response finishes once; `on` spares the wrapper `once` makes per request.
    res.on("finish", onFinish);
    next();
  };
}
