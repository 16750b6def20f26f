import path from "node:path";
import pino from "pino";
import {
  createJwtVerifier,
  loadConfig,
  oidcSettings,
  startServer,
  type DatabaseKind,
  type RunningServer,
} from "@cgs/shared";
import { openTestDatabase, type OpenedTestDatabase } from "@cgs/shared/testing/db";
import { accountsConfigSchema, accountsTables as schema, buildAccounts } from "@cgs/accounts";

export interface TestAccountsServer extends RunningServer {
  database: OpenedTestDatabase<typeof schema>;
  /** Stops the server and drops its database. */
  close(): Promise<void>;
}

/** The real accounts service over HTTP on 127.0.0.1:0 with its own database, configured from `env`. */
export async function startTestAccounts(options: {
  db: DatabaseKind;
  name: string;
  env: Record<string, string>;
}): Promise<TestAccountsServer> {
  const database = await openTestDatabase(options.db, options.name, {
    schema,
    migrationsFolder: path.join(__dirname, "..", "..", "services", "accounts", "drizzle"),
  });
  const config = loadConfig(accountsConfigSchema, { LOG_LEVEL: "silent", ...options.env });
  const logger = pino({ level: "silent" });
  const running = await startServer(
    buildAccounts({ config, logger, database, verifier: createJwtVerifier(oidcSettings(config)) }).app,
    { port: 0, logger, shutdownGraceMs: 500 },
  );
  return {
    ...running,
    database,
    async close() {
      await running.stop();
      await database.destroy();
    },
  };
}
