import path from "node:path";
import pino from "pino";
import {
  createJwtVerifier,
  loadConfig,
  oidcSettings,
  openDatabase,
  startServer,
  type OpenedDatabase,
} from "@cgs/shared";
import { startCuttableProxy, type CuttableProxy } from "@cgs/shared/testing/cuttable-proxy";
import { createTestDatabase, testDatabaseAdminUrl, type TestDatabase } from "@cgs/shared/testing/db";
import {
  startTestIdentityProvider,
  TEST_ALLOWED_AZP_ENV,
  type TestIdentityProvider,
} from "@cgs/shared/testing/tokens";
import type { BillingContext } from "../app";
import { composeBilling, type BillingAdapters } from "../composition";
import { billingConfigSchema, type BillingConfig } from "../config";
import type { BillingDeps } from "../domain/billing-deps";
import * as schema from "../data/schema";
import { startAccountsStandIn, type AccountsStandIn } from "./accounts-stand-in";

export const billingMigrationsFolder = path.join(__dirname, "..", "..", "drizzle");
export const STRIPE_MOCK_URL = process.env.STRIPE_API_BASE || "http://127.0.0.1:12111";
export const TEST_WEBHOOK_SECRET = "whsec_billing_test_secret";

import { testClock, type TestClock } from "@cgs/shared/testing/clock";

export { testClock, type TestClock };

export interface BillingDatabaseFixture {
  database: OpenedDatabase<typeof schema>;
  created: TestDatabase;
  close(): Promise<void>;
}

/** A fresh, migrated PostgreSQL database (TEST_DATABASE_URL's server) with billing's schema. */
export async function openBillingTestDatabase(
  prefix = "billing",
  poolMax = 10,
  via?: CuttableProxy,
): Promise<BillingDatabaseFixture> {
  const created = await createTestDatabase(prefix);
  const url = new URL(created.url);
  if (via) {
    url.hostname = "127.0.0.1";
    url.port = String(via.port);
  }
  const database = await openDatabase({
    url: url.toString(),
    schema,
    migrationsFolder: billingMigrationsFolder,
    // Concurrency tests queue hundreds of transactions on purpose; on a loaded 2-core CI machine the wait for a
    // free connection can pass the 5 s production default, which would fail the test for the wrong reason.
    pool: { max: poolMax, connectionTimeoutMs: 60_000 },
  });
  return {
    database,
    created,
    close: async () => {
      await database.close();
      await created.drop();
    },
  };
}

export function billingTestConfig(env: Record<string, string>): BillingConfig {
  return loadConfig(billingConfigSchema, {
    NODE_ENV: "test",
    LOG_LEVEL: "silent",
    PORT: "0",
    PAYMENT_PROVIDER: "stripe",
    STRIPE_API_BASE: STRIPE_MOCK_URL,
    STRIPE_SECRET_KEY: "sk_test_billing",
    STRIPE_WEBHOOK_SECRET: TEST_WEBHOOK_SECRET,
    PUBLIC_BASE_URL: "http://127.0.0.1:8080",
    ...env,
  });
}

export interface BillingTestService {
  url: string;
  /** The TCP hop between the service's pool and PostgreSQL, when asked for (databaseProxy). */
  databaseProxy?: CuttableProxy;
  config: BillingConfig;
  deps: BillingDeps;
  database: OpenedDatabase<typeof schema>;
  idp: TestIdentityProvider;
  accounts: AccountsStandIn;
  clock: TestClock;
  token(sub: string): Promise<string>;
  close(): Promise<void>;
}

export interface BillingTestServiceOptions {
  env?: Record<string, string>;
  adapters?: Partial<BillingAdapters>;
  clock?: TestClock;
  /** Listen on this port (0: any free port). */
  port?: number;
  /** Reach PostgreSQL through a cuttable TCP proxy (database fault tests). */
  databaseProxy?: boolean;
}

export { freePort } from "@cgs/shared/testing/ports";

/** The composed billing app on 127.0.0.1:0 over a fresh PostgreSQL database, a test identity provider and an accounts stand-in. */
export async function startBillingTestService(
  options: BillingTestServiceOptions = {},
): Promise<BillingTestService> {
  const idp = await startTestIdentityProvider();
  const accounts = await startAccountsStandIn();
  const server = new URL(testDatabaseAdminUrl());
  const databaseProxy = options.databaseProxy
    ? await startCuttableProxy({ host: server.hostname, port: Number(server.port || 5432) })
    : undefined;
  const fixture = await openBillingTestDatabase("billing", 10, databaseProxy);
  const clock = options.clock ?? testClock();
  const config = billingTestConfig({
    OIDC_ISSUER: idp.issuer,
    OIDC_AUDIENCE: idp.audience,
    OIDC_ALLOWED_AZP: TEST_ALLOWED_AZP_ENV,
    OIDC_JWKS_URL: idp.jwksUrl,
    OIDC_JWKS_COOLDOWN_MS: "0",
    ACCOUNTS_URL: accounts.url,
    ACCOUNTS_TIMEOUT_MS: "500",
    DATABASE_URL: fixture.created.url,
    ...options.env,
  });
  const logger = pino({ level: "silent" });
  const context: BillingContext = {
    config,
    logger,
    database: fixture.database,
    verifier: createJwtVerifier(oidcSettings(config)),
  };
  const { app, deps } = composeBilling(context, { clock, ...options.adapters });
  const running = await startServer(app, { port: options.port ?? 0, logger, shutdownGraceMs: 1_000 });
  return {
    url: running.url,
    databaseProxy,
    config,
    deps,
    database: fixture.database,
    idp,
    accounts,
    clock,
    token: (sub) => idp.sign({ sub }),
    async close() {
      await running.stop();
      await fixture.close();
      await databaseProxy?.close();
      await accounts.close();
      await idp.close();
    },
  };
}
