import { z } from "zod";
import { commonServiceEnv, envBoolean, envInt, envUrl, loadConfig } from "@cgs/shared";

const trustProxy = z
  .string()
  .default("loopback")
  .transform((v): boolean | number | string => {
    if (v === "true") return true;
    if (v === "false") return false;
    if (/^\d+$/.test(v)) return Number(v);
    return v;
  });

/** Outside production the simulator's beacons answer here (sessions' SIMULATOR_BEACON_PORT default). */
const LOCAL_BEACON_ORIGIN = "http://127.0.0.1:8108";

/** "https://a.example, https://b.example:8443" → the origins, each exactly scheme://host[:port]. */
const beaconOrigins = z
  .string()
  .optional()
  .transform((value, ctx): string[] | undefined => {
    if (value === undefined) return undefined;
    const origins: string[] = [];
    for (const item of value.split(",").map((v) => v.trim())) {
      if (item === "") continue;
      let origin: string | null = null;
      try {
        const url = new URL(item);
        if ((url.protocol === "http:" || url.protocol === "https:") && url.origin === item.replace(/\/$/, ""))
          origin = url.origin;
      } catch {
        origin = null;
      }
      if (!origin) {
        ctx.addIssue({
          code: z.ZodIssueCode.custom,
          message: `"${item}" is not an origin (scheme://host[:port], http or https, no path)`,
        });
        return z.NEVER;
      }
      origins.push(origin);
    }
    return origins;
  });

const gatewayEnvShape = z.object({
  ...commonServiceEnv(8080),
  APP_VERSION: z.string().default("0.1.0").describe("Build version reported by GET /api/v1/health"),
  PUBLIC_BASE_URL: envUrl()
    .default("http://127.0.0.1:8080")
    .describe(
      "Public origin of the gateway (scheme://host[:port]); cookie-authenticated writes must come from it",
    ),
  TRUST_PROXY: trustProxy.describe(
    "Express 'trust proxy': loopback (default), a hop count, true/false, or comma-separated subnets of the load balancer",
  ),
  SESSIONS_URL: envUrl().default("http://127.0.0.1:8101").describe("Base URL of the sessions service"),
  BILLING_URL: envUrl().default("http://127.0.0.1:8102").describe("Base URL of the billing service"),
  ACCOUNTS_URL: envUrl().default("http://127.0.0.1:8103").describe("Base URL of the accounts service"),
  AUTH_PROXY_URL: envUrl().default("http://127.0.0.1:8104").describe("Base URL of the auth-proxy service"),
  UPSTREAM_TIMEOUT_MS: envInt(15_000, 1).describe(
    "Max wait for an upstream's response headers (and idle body), in ms",
  ),
  UPSTREAM_CONNECT_TIMEOUT_MS: envInt(2_000, 1).describe(
    "Max wait to open a connection to an upstream, in ms",
  ),
  UPSTREAM_MAX_SOCKETS: envInt(128, 1).describe("Keep-alive connection pool size per upstream"),
  BODY_LIMIT: z.string().default("64kb").describe('Max request body size, e.g. "64kb"'),
  SESSION_COOKIE_NAME: z
    .string()
    .min(1)
    .default("cgs_session")
    .describe("HttpOnly cookie carrying the browser's access token"),
  REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\//, "must be a redis:// or rediss:// URL")
    .optional()
    .describe(
      "Redis for rate-limit counters shared by every gateway replica; unset = in-memory (single replica)",
    ),
  REDIS_COMMAND_TIMEOUT_MS: envInt(250, 1).describe(
    "Max wait for one Redis rate-limit call (one per event-loop turn covers every key); past it this replica counts on its own, in ms",
  ),
  GATEWAY_REPLICAS: envInt(1, 1).describe(
    "Gateway replicas serving, when GATEWAY_PEERS_DNS is unset or has not answered yet; while Redis is unreachable each replica allows limit / replicas",
  ),
  GATEWAY_PEERS_DNS: z
    .string()
    .regex(/^[A-Za-z0-9.-]+$/, "must be a DNS name")
    .optional()
    .describe(
      "DNS name of a headless Service listing the ready gateway pods (the chart's <gateway>-peers); its address count, asked every 5 s, is the replica count while Redis is unreachable. Unset: GATEWAY_REPLICAS",
    ),
  GATEWAY_PEERS_DNS_SERVER: z
    .string()
    .regex(/^[^\s:]+:\d+$/, "must be host:port")
    .optional()
    .describe("DNS server (host:port) asked for GATEWAY_PEERS_DNS; unset = the system's resolver"),
  RATE_LIMIT_WINDOW_MS: envInt(60_000, 1).describe("Rate-limit window, in ms"),
  RATE_LIMIT_READ: envInt(60, 1).describe(
    "Read (GET) requests per window per account / per IP on public routes",
  ),
  RATE_LIMIT_WRITE: envInt(20, 1).describe(
    "Write (POST, PATCH, DELETE) requests per window per account / per IP",
  ),
  RATE_LIMIT_POLL: envInt(30, 1).describe("GET /api/v1/sessions/poll requests per window per account"),
  RATE_LIMIT_WEBHOOK: envInt(600, 1).describe("Stripe webhook requests per window per client IP"),
  RATE_LIMIT_RESET_EMAIL: envInt(5, 1).describe(
    "Password-reset requests per e-mail address per RATE_LIMIT_RESET_EMAIL_WINDOW_MS",
  ),
  RATE_LIMIT_RESET_EMAIL_WINDOW_MS: envInt(3_600_000, 1).describe(
    "Window of the per-e-mail password-reset limit, in ms",
  ),
  // Read by the OpenTelemetry SDK itself (the telemetry preload starts before this schema runs); checked
  // here so a typo fails at start-up instead of silently tracing every request.
  OTEL_TRACES_SAMPLER: z
    .enum([
      "always_on",
      "always_off",
      "traceidratio",
      "parentbased_always_on",
      "parentbased_always_off",
      "parentbased_traceidratio",
    ])
    .optional()
    .describe(
      "OpenTelemetry sampler; production uses parentbased_traceidratio (unset = the SDK's parentbased_always_on)",
    ),
  OTEL_TRACES_SAMPLER_ARG: z.coerce
    .number()
    .min(0)
    .max(1)
    .optional()
    .describe("Ratio of new traces the *traceidratio samplers keep, 0..1 (e.g. 0.1)"),
  PORTAL_OIDC_CLIENT_ID: z
    .string()
    .min(1)
    .default("cgs-portal")
    .describe("Public OIDC client (authorization code + PKCE S256) the portal's /login uses"),
  PORTAL_COOKIE_SECRET: z
    .string()
    .min(32, "must be at least 32 characters")
    .optional()
    .describe(
      "Signs the portal's login-state cookie (OIDC state + PKCE verifier) and encrypts its refresh-token cookie (cgs_refresh); required in production",
    ),
  PORTAL_BEACON_ORIGINS: beaconOrigins.describe(
    `Comma-separated origins of the regions' latency beacons (GET /api/v1/regions' beaconUrl), allowed in the portal pages' CSP connect-src so the Play page can measure them; unset = ${LOCAL_BEACON_ORIGIN} (the simulator's beacons) outside production, none in production`,
  ),
  LOCAL_CHECKOUT: envBoolean(false).describe(
    "Development only (refused in production): serve billing's local Checkout stand-in (PAYMENT_PROVIDER=local) at /local-checkout/ on this origin",
  ),
});

export const gatewayEnvSchema = gatewayEnvShape
  .superRefine((config, ctx) => {
    if (config.NODE_ENV === "production" && config.LOCAL_CHECKOUT) {
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        path: ["LOCAL_CHECKOUT"],
        message: "is a development stand-in for Stripe's page and is not allowed in production",
      });
    }
  })
  .transform((config) => ({
    ...config,
    PORTAL_BEACON_ORIGINS:
      config.PORTAL_BEACON_ORIGINS ?? (config.NODE_ENV === "production" ? [] : [LOCAL_BEACON_ORIGIN]),
  }));

export type GatewayConfig = z.output<typeof gatewayEnvSchema>;

export function loadGatewayConfig(env: Record<string, string | undefined> = process.env): GatewayConfig {
  return loadConfig(gatewayEnvSchema, env);
}
