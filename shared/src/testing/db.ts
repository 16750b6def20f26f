import { randomBytes } from "node:crypto";
import { Client } from "pg";
import type { DatabaseKind, DatabaseSchema } from "../db/database-types";
import { openDatabase, type OpenedDatabase } from "../db/open-database";

export const DEFAULT_TEST_DATABASE_URL = "postgres://cgs:cgs@127.0.0.1:5432/postgres";

export function testDatabaseAdminUrl(): string {
  return process.env.TEST_DATABASE_URL || DEFAULT_TEST_DATABASE_URL;
}

export interface TestDatabase {
  /** Connection string of the fresh database. */
  url: string;
  name: string;
  /** Drops the database, closing any connections still open on it. */
  drop(): Promise<void>;
}

async function withAdminClient<T>(work: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: testDatabaseAdminUrl() });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** Creates a uniquely named, empty database on TEST_DATABASE_URL's server. */
export async function createTestDatabase(prefix: string): Promise<TestDatabase> {
  const safePrefix = prefix
    .toLowerCase()
    .replace(/[^a-z0-9_]/g, "_")
    .slice(0, 40);
  const name = `${safePrefix}_${Date.now().toString(36)}_${randomBytes(4).toString("hex")}`;
  await withAdminClient((client) => client.query(`CREATE DATABASE "${name}"`));
  const url = new URL(testDatabaseAdminUrl());
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    drop: () => dropDatabase(name),
  };
}

/**
 * DROP … WITH (FORCE) ends our own sessions, but a non-superuser may not end an autovacuum worker that
 * happens to be on the database (42501); it finishes within moments, so try again briefly.
 */
async function dropDatabase(name: string): Promise<void> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      await withAdminClient((client) => client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
      return;
    } catch (err) {
      if ((err as { code?: string }).code !== "42501" || attempt >= 20) throw err;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}

export const testDatabaseKinds: readonly DatabaseKind[] = ["postgres", "pglite"];

export interface OpenedTestDatabase<TSchema extends DatabaseSchema> extends OpenedDatabase<TSchema> {
  /** PostgreSQL URL of the test database; undefined for PGlite. */
  url?: string;
  /** Closes the database and drops it (PostgreSQL) — call in afterAll/afterEach. */
  destroy(): Promise<void>;
}

/** Opens (and migrates) a throwaway database of the given kind: a fresh PostgreSQL database or in-memory PGlite. */
export async function openTestDatabase<TSchema extends DatabaseSchema>(
  kind: DatabaseKind,
  prefix: string,
  options: { schema: TSchema; migrationsFolder: string },
): Promise<OpenedTestDatabase<TSchema>> {
  if (kind === "pglite") {
    const opened = await openDatabase({ ...options });
    return { ...opened, destroy: () => opened.close() };
  }
  const created = await createTestDatabase(prefix);
  try {
    const opened = await openDatabase({ ...options, url: created.url, pool: { max: 5 } });
    return {
      ...opened,
      url: created.url,
      destroy: async () => {
        await opened.close();
        await created.drop();
      },
    };
  } catch (err) {
    await created.drop();
    throw err;
  }
}
