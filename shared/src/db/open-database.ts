import { mkdirSync } from "node:fs";
import { PGlite } from "@electric-sql/pglite";
import { sql } from "drizzle-orm";
import { drizzle as drizzlePglite } from "drizzle-orm/pglite";
import { migrate as migratePglite } from "drizzle-orm/pglite/migrator";
import { drizzle as drizzleNodePg } from "drizzle-orm/node-postgres";
import { migrate as migrateNodePg } from "drizzle-orm/node-postgres/migrator";
import { Pool, type PoolClient } from "pg";
import { silentLogger, type ComponentLogger } from "./component-logger";
import type { Database, DatabaseKind, DatabaseSchema, Transaction } from "./database-types";

export interface PoolSettings {
  /** Connections per process; replicas × max must stay under the server's max_connections. */
  max?: number;
  idleTimeoutMs?: number;
  connectionTimeoutMs?: number;
  /** Server-side cap on any one statement, so a stuck query cannot hold a connection forever. */
  statementTimeoutMs?: number;
}

export interface OpenDatabaseOptions<TSchema extends DatabaseSchema> {
  /** PostgreSQL connection string; when unset an embedded PGlite database is used. */
  url?: string;
  /** PGlite data directory; in memory when unset. Ignored when `url` is set. */
  pgliteDataDir?: string;
  /** Folder written by `drizzle-kit generate` (holds meta/_journal.json). */
  migrationsFolder: string;
  schema: TSchema;
  logger?: ComponentLogger;
  pool?: PoolSettings;
  applicationName?: string;
}

export interface OpenedDatabase<TSchema extends DatabaseSchema> {
  db: Database<TSchema>;
  kind: DatabaseKind;
  /** Resolves when the database answers a trivial query; for /readyz. */
  ping(): Promise<void>;
  withTransaction<T>(work: (tx: Transaction<TSchema>) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

const defaultPool: Required<PoolSettings> = {
  max: 10,
  idleTimeoutMs: 30_000,
  connectionTimeoutMs: 5_000,
  statementTimeoutMs: 15_000,
};

// Arbitrary constant: serialises migrations when several replicas start at once.
const MIGRATION_LOCK_KEY = 7_262_531_001;

/** Opens PostgreSQL (or PGlite when no URL is given) and applies pending migrations before returning. */
export async function openDatabase<TSchema extends DatabaseSchema>(
  options: OpenDatabaseOptions<TSchema>,
): Promise<OpenedDatabase<TSchema>> {
  const logger = options.logger ?? silentLogger;
  return options.url
    ? openPostgres(options.url, options, logger)
    : openPglite(options.pgliteDataDir, options, logger);
}

async function openPostgres<TSchema extends DatabaseSchema>(
  url: string,
  options: OpenDatabaseOptions<TSchema>,
  logger: ComponentLogger,
): Promise<OpenedDatabase<TSchema>> {
  const settings = { ...defaultPool, ...options.pool };
  const pool = new Pool({
    connectionString: url,
    max: settings.max,
    idleTimeoutMillis: settings.idleTimeoutMs,
    connectionTimeoutMillis: settings.connectionTimeoutMs,
    statement_timeout: settings.statementTimeoutMs,
    application_name: options.applicationName,
  });
  // An idle client losing its connection emits here; unhandled it would crash the process.
  pool.on("error", (err) => logger.error({ err }, "postgres pool client error"));
  // So does a checked-out client between queries (a transaction awaiting JS when the server restarts): its
  // next query fails and the request answers 503; the event itself must not take the process down.
  pool.on("connect", (client) => {
    client.on("error", (err) => logger.warn({ err }, "postgres connection lost"));
  });

  try {
    const client = await pool.connect();
    try {
      await client.query("select pg_advisory_lock($1)", [MIGRATION_LOCK_KEY]);
      try {
        await migrateNodePg(drizzleNodePg(client, { schema: options.schema }), {
          migrationsFolder: options.migrationsFolder,
        });
      } finally {
        await client.query("select pg_advisory_unlock($1)", [MIGRATION_LOCK_KEY]);
      }
    } finally {
      client.release();
    }
  } catch (err) {
    await pool.end().catch(() => undefined);
    throw err;
  }
  logger.info({ kind: "postgres" }, "database migrated");

  const db = drizzleNodePg(pool, { schema: options.schema }) as unknown as Database<TSchema>;
  db.transaction = poolSafeTransaction(pool, options.schema);
  return wrap(db, "postgres", () => pool.end());
}

/**
 * `db.transaction` for a pool, with the connection's return guaranteed. Drizzle's own version (0.45) sends BEGIN
 * before its try/finally, so a connection that dies at BEGIN (the server restarting, a network cut) is never
 * released: each such failure leaks one pool slot until every later request waits out the connection timeout.
 * Here the checked-out client runs Drizzle's transaction on itself (which never releases), and this function
 * releases it on every path, discarding it unless it is back outside any transaction.
 */
function poolSafeTransaction<TSchema extends DatabaseSchema>(
  pool: Pool,
  schema: TSchema,
): Database<TSchema>["transaction"] {
  // One Drizzle instance per physical connection, built on its first transaction and reused after.
  const onClient = new WeakMap<PoolClient, Database<TSchema>>();
  return async (work, config) => {
    const client = await pool.connect();
    let discard: Error | undefined;
    try {
      let clientDb = onClient.get(client);
      if (!clientDb) {
        clientDb = drizzleNodePg(client, { schema }) as unknown as Database<TSchema>;
        onClient.set(client, clientDb);
      }
      return await clientDb.transaction(work, config);
    } catch (err) {
      if (client.getTransactionStatus() !== "I") {
        discard = err instanceof Error ? err : new Error(String(err));
      }
      throw err;
    } finally {
      client.release(discard);
    }
  };
}

async function openPglite<TSchema extends DatabaseSchema>(
  dataDir: string | undefined,
  options: OpenDatabaseOptions<TSchema>,
  logger: ComponentLogger,
): Promise<OpenedDatabase<TSchema>> {
  if (dataDir) mkdirSync(dataDir, { recursive: true });
  const client = new PGlite(dataDir);
  const pgliteDb = drizzlePglite(client, { schema: options.schema });
  try {
    await migratePglite(pgliteDb, { migrationsFolder: options.migrationsFolder });
  } catch (err) {
    await client.close().catch(() => undefined);
    throw err;
  }
  logger.info({ kind: "pglite", dataDir: dataDir ?? "memory" }, "database migrated");
  return wrap(pgliteDb as unknown as Database<TSchema>, "pglite", () => client.close());
}

function wrap<TSchema extends DatabaseSchema>(
  db: Database<TSchema>,
  kind: DatabaseKind,
  closeClient: () => Promise<void>,
): OpenedDatabase<TSchema> {
  let closed: Promise<void> | undefined;
  return {
    db,
    kind,
    async ping() {
      await db.execute(sql`select 1`);
    },
    withTransaction: (work) => db.transaction(work),
    close() {
      closed ??= closeClient();
      return closed;
    },
  };
}
