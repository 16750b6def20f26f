import { z } from "zod";

export interface ConfigIssue {
  variable: string;
  description?: string;
  problem: string;
}

/** Thrown at start-up when the environment does not satisfy a process's schema; lists every bad variable. */
export class ConfigError extends Error {
  readonly issues: ConfigIssue[];

  constructor(issues: ConfigIssue[]) {
    const lines = issues.map(
      (i) => `  - ${i.variable}: ${i.problem}${i.description ? ` (${i.description})` : ""}`,
    );
    super(`Invalid configuration (${issues.length} variable(s)):\n${lines.join("\n")}`);
    this.name = "ConfigError";
    this.issues = issues;
  }
}

type Env = Record<string, string | undefined>;

function describeOf(schema: z.ZodTypeAny, key: string): string | undefined {
  let node: z.ZodTypeAny | undefined = schema;
  while (node) {
    if (node instanceof z.ZodObject) break;
    if (node instanceof z.ZodEffects) node = node.innerType();
    else if (node instanceof z.ZodPipeline) node = node._def.in as z.ZodTypeAny;
    else return undefined;
  }
  const field = (node as z.ZodObject<z.ZodRawShape>).shape[key] as z.ZodTypeAny | undefined;
  return field?.description;
}

/**
 * Parses the environment against a zod schema once, at start-up. Empty strings count as unset so
 * `FOO=` falls back to the default. Throws a ConfigError naming every bad variable with its description.
 */
export function loadConfig<S extends z.ZodTypeAny>(schema: S, env: Env = process.env): z.output<S> {
  const cleaned: Env = {};
  for (const [k, v] of Object.entries(env)) {
    if (v !== undefined && v.trim() !== "") cleaned[k] = v;
  }
  const result = schema.safeParse(cleaned);
  if (result.success) return result.data as z.output<S>;
  const byVariable = new Map<string, ConfigIssue>();
  for (const issue of result.error.issues) {
    const variable = issue.path.length > 0 ? issue.path.map(String).join(".") : "(environment)";
    const top = String(issue.path[0] ?? "");
    const problem =
      cleaned[top] === undefined && issue.code === "invalid_type" ? "is required" : issue.message;
    const existing = byVariable.get(variable);
    if (existing) {
      existing.problem += `; ${problem}`;
    } else {
      byVariable.set(variable, { variable, description: describeOf(schema, top), problem });
    }
  }
  throw new ConfigError([...byVariable.values()]);
}

// ---------- reusable fragments ----------

export const envPort = (defaultPort: number) =>
  z.coerce.number().int().min(0).max(65535).default(defaultPort);

export const envInt = (defaultValue: number, min = 0) =>
  z.coerce.number().int().min(min).default(defaultValue);

export const envBoolean = (defaultValue: boolean) =>
  z
    .enum(["true", "false", "1", "0", "yes", "no"])
    .default(defaultValue ? "true" : "false")
    .transform((v) => v === "true" || v === "1" || v === "yes");

export const envUrl = () =>
  z
    .string()
    .url()
    .transform((v) => v.replace(/\/+$/, ""));

/** Comma-separated list, trimmed, empties dropped. */
export const envList = (defaultValue: string[] = []) =>
  z
    .string()
    .optional()
    .transform((v) =>
      v === undefined
        ? defaultValue
        : v
            .split(",")
            .map((s) => s.trim())
            .filter(Boolean),
    );

export const logLevels = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof logLevels)[number];

/**
 * Variables every HTTP process reads. Spread into a process's own z.object:
 * `z.object({ ...commonServiceEnv(8101), DATABASE_URL: ... })`.
 */
export const commonServiceEnv = (defaultPort: number) => ({
  NODE_ENV: z
    .enum(["development", "test", "production"])
    .default("development")
    .describe("Runtime mode: development, test or production"),
  LOG_LEVEL: z.enum(logLevels).default("info").describe("pino log level"),
  HOST: z.string().min(1).default("127.0.0.1").describe("Interface to listen on (0.0.0.0 in a container)"),
  PORT: envPort(defaultPort).describe("TCP port to listen on (0 picks a free port)"),
  METRICS_PORT: envPort(defaultPort + 1000).describe(
    "Port of the Prometheus /metrics endpoint, apart from the API port and never exposed publicly; defaults to the process's default PORT + 1000 (gateway 9080, sessions 9101, billing 9102, accounts 9103, auth-proxy 9104)",
  ),
  OIDC_ISSUER: envUrl()
    .default("http://127.0.0.1:8081/realms/cgs")
    .describe("Identity provider issuer URL; tokens must carry exactly this iss"),
  OIDC_AUDIENCE: z
    .string()
    .min(1)
    .default("cgs-api")
    .describe("Audience (aud) every access token must carry"),
  OIDC_JWKS_URL: envUrl()
    .optional()
    .describe("JWKS URL; defaults to <OIDC_ISSUER>/protocol/openid-connect/certs"),
  OIDC_ALLOWED_AZP: envList(["cgs-portal", "cgs-cli"]).describe(
    "Comma-separated OIDC clients (azp) whose access tokens are accepted; add cgs-test only on a local realm",
  ),
  OIDC_CLOCK_TOLERANCE_SECONDS: z.coerce
    .number()
    .int()
    .min(0)
    .max(300)
    .default(30)
    .describe("Allowed clock skew for exp/nbf/iat, in seconds (0-300)"),
  OIDC_JWKS_COOLDOWN_MS: envInt(30_000).describe(
    "Minimum time between JWKS refetches triggered by an unknown key id, in ms",
  ),
  SHUTDOWN_GRACE_MS: envInt(10_000, 1).describe(
    "How long shutdown waits for in-flight requests to finish before closing sockets, in ms",
  ),
});

export type CommonServiceConfig = z.output<z.ZodObject<ReturnType<typeof commonServiceEnv>>>;

export interface OidcSettings {
  issuer: string;
  audience: string;
  jwksUrl: string;
  allowedAzp: string[];
  clockToleranceSeconds: number;
  jwksCooldownMs: number;
}

/** The verifier settings from a parsed config, deriving the JWKS URL from the issuer when unset. */
export function oidcSettings(config: CommonServiceConfig): OidcSettings {
  return {
    issuer: config.OIDC_ISSUER,
    audience: config.OIDC_AUDIENCE,
    jwksUrl: config.OIDC_JWKS_URL ?? `${config.OIDC_ISSUER}/protocol/openid-connect/certs`,
    allowedAzp: config.OIDC_ALLOWED_AZP,
    clockToleranceSeconds: config.OIDC_CLOCK_TOLERANCE_SECONDS,
    jwksCooldownMs: config.OIDC_JWKS_COOLDOWN_MS,
  };
}

/** Where a service keeps its own database: PostgreSQL when DATABASE_URL is set, embedded PGlite otherwise. */
export const databaseEnv = () => ({
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, "must be a postgres:// connection string")
    .optional()
    .describe("PostgreSQL connection string for this service's own database; PGlite when unset"),
  PGLITE_DATA_DIR: z
    .string()
    .min(1)
    .optional()
    .describe("PGlite data directory when DATABASE_URL is unset; in memory when both are unset"),
});

/** SQS settings for a service that publishes through its outbox and consumes its own inbound queue. */
export const queueEnv = (defaultQueueName: string) => ({
  AWS_REGION: z.string().min(1).default("us-east-1").describe("AWS region of the SQS queues"),
  AWS_ENDPOINT_URL: envUrl()
    .optional()
    .describe("AWS endpoint override (moto at http://127.0.0.1:5000 locally); unset in production"),
  QUEUE_NAME: z
    .string()
    .min(1)
    .default(defaultQueueName)
    .describe("This service's inbound SQS queue (its DLQ is <name>-dlq)"),
  QUEUE_NAME_PREFIX: z
    .string()
    .default("")
    .describe("Prefix applied to every queue name this process publishes to or consumes (test isolation)"),
  CREATE_QUEUES: envBoolean(false).describe(
    "Create the inbound queue and DLQ at start-up (local and tests; production queues come from infra)",
  ),
  QUEUE_MAX_RECEIVE_COUNT: envInt(5, 1).describe("Receives before a failing message moves to the DLQ"),
  QUEUE_WAIT_SECONDS: envInt(20, 0).describe("SQS long-polling wait, in seconds (0-20)"),
  OUTBOX_RELAY_INTERVAL_MS: envInt(500, 10).describe("Pause between outbox relay passes when idle, in ms"),
  QUEUE_PRUNE_INTERVAL_MS: envInt(3_600_000, 10).describe(
    "Pause between passes that delete sent outbox rows and old processed-event ids, in ms",
  ),
  OUTBOX_SENT_RETENTION_HOURS: envInt(24, 1).describe("Hours a sent outbox row is kept (for inspection)"),
  PROCESSED_EVENT_RETENTION_HOURS: envInt(336, 1).describe(
    "Hours a handled event id is kept to drop redeliveries; at least the queue's message retention (14 days)",
  ),
});
