import { readFileSync } from "node:fs";
import path from "node:path";

/** shared/openapi.json; the same relative location from src/ (ts-jest) and dist/ (built). */
export const openapiPath: string = path.join(__dirname, "..", "openapi.json");

export const HTTP_METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"] as const;
export type HttpMethod = (typeof HTTP_METHODS)[number];

export const OPERATION_OWNERS = ["gateway", "sessions", "billing", "accounts", "auth-proxy"] as const;
export type OperationOwner = (typeof OPERATION_OWNERS)[number];

export type RateLimitBucket = "read" | "write" | "poll" | "webhook";
export interface RateLimitExtension {
  bucket: RateLimitBucket;
  /** `account`: keyed by the JWT `sub`; `ip`: keyed by the client IP (public endpoints). */
  scope: "account" | "ip";
}

export type SecurityRequirement = Record<string, string[]>;

export interface OpenApiOperation {
  operationId: string;
  summary?: string;
  description?: string;
  tags?: string[];
  /** `[]` marks a public operation; absent means the document's global security applies. */
  security?: SecurityRequirement[];
  parameters?: unknown[];
  requestBody?: unknown;
  responses: Record<string, unknown>;
  "x-owner": OperationOwner;
  "x-rate-limit": RateLimitExtension | null;
  "x-raw-body"?: boolean;
  [extension: `x-${string}`]: unknown;
}

export type OpenApiPathItem = Partial<Record<HttpMethod, OpenApiOperation>> & { parameters?: unknown[] };

export interface OpenApiDocument {
  openapi: string;
  info: { title: string; version: string; description?: string };
  servers?: Array<{ url: string; description?: string }>;
  security?: SecurityRequirement[];
  tags?: Array<{ name: string; description?: string }>;
  paths: Record<string, OpenApiPathItem>;
  components?: {
    schemas?: Record<string, unknown>;
    responses?: Record<string, unknown>;
    parameters?: Record<string, unknown>;
    headers?: Record<string, unknown>;
    securitySchemes?: Record<string, unknown>;
  };
}

let cached: OpenApiDocument | undefined;

/**
 * The parsed contract, read once per process. Treat it as read-only; hand a copy
 * (`structuredClone`) to anything that may mutate it.
 */
export function loadOpenApiDocument(): OpenApiDocument {
  cached ??= JSON.parse(readFileSync(openapiPath, "utf8")) as OpenApiDocument;
  return cached;
}

export interface OperationInfo {
  method: HttpMethod;
  path: string;
  operationId: string;
  owner: OperationOwner;
  /** True when the operation overrides security with `[]` (no bearer token or cookie needed). */
  public: boolean;
  rateLimit: RateLimitExtension | null;
  /** The body must reach the owner unparsed (e.g. the signed Stripe webhook). */
  rawBody: boolean;
}

function isOwner(value: unknown): value is OperationOwner {
  return typeof value === "string" && (OPERATION_OWNERS as readonly string[]).includes(value);
}

/** Every operation of the document in path order; throws when one lacks a valid `x-owner`. */
export function listOperations(doc: OpenApiDocument = loadOpenApiDocument()): OperationInfo[] {
  const operations: OperationInfo[] = [];
  for (const [route, item] of Object.entries(doc.paths)) {
    for (const method of HTTP_METHODS) {
      const operation = item[method];
      if (operation === undefined) continue;
      const owner: unknown = operation["x-owner"];
      if (!isOwner(owner)) {
        throw new Error(
          `${method.toUpperCase()} ${route}: x-owner must be one of ${OPERATION_OWNERS.join(", ")}`,
        );
      }
      const security = operation.security ?? doc.security ?? [];
      operations.push({
        method,
        path: route,
        operationId: operation.operationId,
        owner,
        public: security.length === 0,
        rateLimit: operation["x-rate-limit"] ?? null,
        rawBody: operation["x-raw-body"] === true,
      });
    }
  }
  return operations;
}
