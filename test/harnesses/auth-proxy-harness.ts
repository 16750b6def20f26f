import path from "node:path";
import pino from "pino";
import { createJwtVerifier, loadConfig, startServer, type RunningServer } from "@cgs/shared";
import { openTestDatabase, type OpenedTestDatabase } from "@cgs/shared/testing/db";
import {
  adaptersFromConfig,
  authProxyConfigSchema,
  authProxyTables as schema,
  composeAuthProxy,
  type AuthProxyAdapters,
  type AuthProxyConfig,
} from "@cgs/auth-proxy";

export const TEST_RESET_SECRET = "auth-proxy-test-secret-0123456789abcdef";

export interface AuthProxyHarness extends RunningServer {
  config: AuthProxyConfig;
  database: OpenedTestDatabase<typeof schema>;
  adapters: AuthProxyAdapters;
  clock: { current: Date | null; now(): Date };
  close(): Promise<void>;
}

/** The real auth-proxy (PostgreSQL or PGlite, Keycloak, SMTP catcher) on 127.0.0.1:0 with its reset worker. */
export async function startAuthProxy(
  options: { db?: "postgres" | "pglite"; env?: Record<string, string> } = {},
): Promise<AuthProxyHarness> {
  const keycloakUrl = process.env.KEYCLOAK_URL || "http://127.0.0.1:8081";
  const smtp = process.env.SMTP_URL || "smtp://127.0.0.1:1025";
  const config = loadConfig(authProxyConfigSchema, {
    LOG_LEVEL: "silent",
    PORT: "0",
    OIDC_ISSUER: `${keycloakUrl}/realms/cgs`,
    SMTP_URL: smtp,
    RESET_TOKEN_SECRET: TEST_RESET_SECRET,
    RESET_WORKER_INTERVAL_MS: "50",
    PUBLIC_BASE_URL: "http://127.0.0.1:8080",
    ...options.env,
  });
  const database = await openTestDatabase(options.db ?? "postgres", "auth_proxy", {
    schema,
    migrationsFolder: path.join(__dirname, "..", "..", "services", "auth-proxy", "drizzle"),
  });
  const logger = pino({ level: "silent" });
  const clock = { current: null as Date | null, now: () => clock.current ?? new Date() };
  // The service's own adapters (Keycloak, SMTP, the codec under TEST_RESET_SECRET), on a clock tests can set.
  const adapters: AuthProxyAdapters = { ...adaptersFromConfig(config), clock };
  const context = {
    config,
    logger,
    database,
    verifier: createJwtVerifier({
      issuer: config.OIDC_ISSUER,
      audience: config.OIDC_AUDIENCE,
      allowedAzp: config.OIDC_ALLOWED_AZP,
      jwksUrl: `${config.OIDC_ISSUER}/protocol/openid-connect/certs`,
    }),
  };
  const { app, workers } = composeAuthProxy(context, adapters);
  const running = await startServer(app, {
    port: 0,
    logger,
    shutdownGraceMs: 1_000,
    onClose: (await workers?.()) ?? [],
  });
  return {
    ...running,
    config,
    database,
    adapters,
    clock,
    async close() {
      await running.stop();
      await database.destroy();
    },
  };
}
