import type { Request, Response } from "express";
import type { AuthLocals } from "@cgs/shared";
import type { RouteEntry } from "./route-table";

/** What the /api/ chain's handlers leave on res.locals for the ones after them. */
export interface GatewayLocals extends Partial<AuthLocals> {
  /** The documented operation the request matched (set by the chain's route lookup). */
  route?: RouteEntry;
}

/** A request whose JSON body the gateway parsed, with the bytes as they arrived (forwarded as they are). */
export type RawBodyRequest = Request & { rawBody?: Buffer };

/** The operation the route lookup resolved; every handler after the lookup may rely on it. */
export function routeOf(res: Response): RouteEntry {
  const route = (res.locals as GatewayLocals).route;
  if (!route) throw new Error("route not resolved");
  return route;
}

/** The documented route a request matched, for metric labels (undefined outside /api/). */
export function matchedRoutePath(_req: Request, res: Response): string | undefined {
  return (res.locals as GatewayLocals).route?.path;
}
