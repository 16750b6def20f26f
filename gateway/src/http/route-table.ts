import {
  listOperations,
  type OpenApiDocument,
  type OperationOwner,
  type RateLimitExtension,
} from "@cgs/shared";

export type UpstreamOwner = Exclude<OperationOwner, "gateway">;
export type UpstreamUrls = Record<UpstreamOwner, string>;

/** Operations the gateway answers itself (x-owner: gateway), by operationId. */
export const GATEWAY_OPERATIONS = new Set(["getHealth"]);

/** Paths the gateway serves outside the API contract's operations (not forwarded). */
export const GATEWAY_LOCAL_PATHS = ["/openapi.json", "/healthz", "/readyz"] as const;

export interface RouteEntry {
  method: string;
  path: string;
  operationId: string;
  owner: OperationOwner;
  public: boolean;
  rawBody: boolean;
  rateLimit: RateLimitExtension | null;
  /** Base URL the request is forwarded to; null when the gateway answers itself. */
  upstream: string | null;
  pattern: RegExp;
}

export type RouteMatch =
  | { kind: "found"; route: RouteEntry }
  | { kind: "method-not-allowed"; allow: string[] }
  | { kind: "not-found" };

export interface RouteTable {
  routes: RouteEntry[];
  match(method: string, path: string): RouteMatch;
}

function patternFor(template: string): RegExp {
  const escaped = template
    .split(/(\{[^}]+\})/)
    .map((part) => (/^\{[^}]+\}$/.test(part) ? "[^/]+" : part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")))
    .join("");
  return new RegExp(`^${escaped}$`);
}

/**
 * The gateway's routing, derived from openapi.json: each documented operation goes to its x-owner's
 * upstream. Throws when an operation cannot be routed, so drift fails at start-up (and in the contract test).
 */
export function buildRouteTable(doc: OpenApiDocument, upstreams: UpstreamUrls): RouteTable {
  const routes: RouteEntry[] = listOperations(doc).map((op) => {
    let upstream: string | null;
    if (op.owner === "gateway") {
      if (!GATEWAY_OPERATIONS.has(op.operationId)) {
        throw new Error(
          `${op.method.toUpperCase()} ${op.path}: owned by the gateway but the gateway has no handler for ${op.operationId}`,
        );
      }
      upstream = null;
    } else {
      upstream = upstreams[op.owner];
      if (!upstream)
        throw new Error(`${op.method.toUpperCase()} ${op.path}: no upstream URL for owner ${op.owner}`);
    }
    if (!op.path.startsWith("/api/v1/")) throw new Error(`${op.path}: operations must live under /api/v1/`);
    return {
      method: op.method.toUpperCase(),
      path: op.path,
      operationId: op.operationId,
      owner: op.owner,
      public: op.public,
      rawBody: op.rawBody,
      rateLimit: op.rateLimit,
      upstream,
      pattern: patternFor(op.path),
    };
  });
  for (const id of GATEWAY_OPERATIONS) {
    if (!routes.some((r) => r.operationId === id))
      throw new Error(`gateway handler ${id} has no documented operation`);
  }

  return {
    routes,
    match(method, path) {
      const candidates = routes.filter((r) => r.pattern.test(path));
      if (candidates.length === 0) return { kind: "not-found" };
      const wanted = method === "HEAD" ? "GET" : method;
      const route = candidates.find((r) => r.method === wanted);
      return route
        ? { kind: "found", route }
        : { kind: "method-not-allowed", allow: candidates.map((r) => r.method) };
    },
  };
}
