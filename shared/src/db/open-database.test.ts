import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { sql } from "drizzle-orm";
import { startCuttableProxy } from "../testing/cuttable-proxy";
import { createTestDatabase, openTestDatabase, testDatabaseKinds } from "../testing/db";
import { handledEventsTable, testSchema } from "../testing/test-schema";
import { testMigrationsFolder } from "../testing/test-migrations";
import { toAppError } from "../errors";
import { openDatabase } from "./open-database";

const migrationsFolder = testMigrationsFolder;

async function tableNames(
  run: (q: ReturnType<typeof sql>) => Promise<{ rows: unknown[] }>,
): Promise<string[]> {
  const result = await run(
    sql`select table_name from information_schema.tables where table_schema = 'public'`,
  );
  return (result.rows as { table_name: string }[]).map((r) => r.table_name).sort();
}

describe.each(testDatabaseKinds)("openDatabase on %s", (kind) => {
  it("when opened, then the migrations are applied and ping answers", async () => {
    const database = await openTestDatabase(kind, "shared_open", { schema: testSchema, migrationsFolder });
    try {
      expect(database.kind).toBe(kind);
      await expect(database.ping()).resolves.toBeUndefined();
      const tables = await tableNames((q) => database.db.execute(q));
      expect(tables).toEqual(["outbox", "processed_events", "test_handled_events"]);
      const applied = await database.db.execute(
        sql`select count(*)::int as n from drizzle.__drizzle_migrations`,
      );
      expect(applied.rows[0]).toEqual({ n: 1 });
    } finally {
      await database.destroy();
    }
  });

  it("when a transaction throws, then its writes are rolled back", async () => {
    const database = await openTestDatabase(kind, "shared_tx", { schema: testSchema, migrationsFolder });
    try {
      const eventId = "6f1c1b8e-7c51-4d3c-9e0a-0a8b1f1f2c11";
      await expect(
        database.withTransaction(async (tx) => {
          await tx.insert(handledEventsTable).values({ eventId, eventType: "session.started" });
          throw new Error("boom");
        }),
      ).rejects.toThrow("boom");
      await database.withTransaction((tx) =>
        tx.insert(handledEventsTable).values({ eventId, eventType: "session.stopped" }),
      );
      const rows = await database.db.select().from(handledEventsTable);
      expect(rows.map((r) => r.eventType)).toEqual(["session.stopped"]);
    } finally {
      await database.destroy();
    }
  });
});

describe("openDatabase start-up", () => {
  it("when several PostgreSQL replicas start at once and restart, then migrations run exactly once", async () => {
    const created = await createTestDatabase("shared_replicas");
    try {
      const opened = await Promise.all(
        [1, 2, 3].map(() => openDatabase({ url: created.url, schema: testSchema, migrationsFolder })),
      );
      await Promise.all(opened.map((d) => d.close()));
      const again = await openDatabase({ url: created.url, schema: testSchema, migrationsFolder });
      try {
        const applied = await again.db.execute(
          sql`select count(*)::int as n from drizzle.__drizzle_migrations`,
        );
        expect(applied.rows[0]).toEqual({ n: 1 });
      } finally {
        await again.close();
      }
    } finally {
      await created.drop();
    }
  });

  it("when a PGlite data directory is reopened, then its data survives and migrations are not re-run", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "cgs-pglite-"));
    try {
      const first = await openDatabase({ pgliteDataDir: dir, schema: testSchema, migrationsFolder });
      await first.db
        .insert(handledEventsTable)
        .values({ eventId: "0b7e5a4e-2f7f-4c39-8d6e-5b1f8f9d6a01", eventType: "account.purge" });
      await first.close();
      const second = await openDatabase({ pgliteDataDir: dir, schema: testSchema, migrationsFolder });
      try {
        expect(second.kind).toBe("pglite");
        expect(await second.db.select().from(handledEventsTable)).toHaveLength(1);
        const applied = await second.db.execute(
          sql`select count(*)::int as n from drizzle.__drizzle_migrations`,
        );
        expect(applied.rows[0]).toEqual({ n: 1 });
      } finally {
        await second.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("when the connection dies as a transaction begins, then the request fails as unavailable and the pool slot comes back", async () => {
    const created = await createTestDatabase("shared_begin_drop");
    const target = new URL(created.url);
    const proxy = await startCuttableProxy({ host: target.hostname, port: Number(target.port || 5432) });
    const viaProxy = new URL(created.url);
    viaProxy.port = String(proxy.port);
    // One connection: if the dead one were never handed back, the next transaction would wait for a slot forever.
    const database = await openDatabase({
      url: viaProxy.toString(),
      schema: testSchema,
      migrationsFolder,
      pool: { max: 1, connectionTimeoutMs: 2_000 },
    });
    const record = (eventId: string) =>
      database.withTransaction((tx) =>
        tx.insert(handledEventsTable).values({ eventId, eventType: "session.started" }),
      );
    try {
      await record("5a0f6f2e-1b7c-4b8e-9d55-3c2a7e9b0a01");
      proxy.dropOnNextRequest();
      const failed = await record("5a0f6f2e-1b7c-4b8e-9d55-3c2a7e9b0a02").then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(toAppError(failed)).toMatchObject({ code: "UNAVAILABLE", status: 503 });
      await record("5a0f6f2e-1b7c-4b8e-9d55-3c2a7e9b0a03");
      const rows = await database.db.select().from(handledEventsTable);
      expect(rows.map((r) => r.eventId).sort()).toEqual([
        "5a0f6f2e-1b7c-4b8e-9d55-3c2a7e9b0a01",
        "5a0f6f2e-1b7c-4b8e-9d55-3c2a7e9b0a03",
      ]);
    } finally {
      await database.close();
      await proxy.close();
      await created.drop();
    }
  });

  it("when PostgreSQL is unreachable, then openDatabase rejects instead of hanging or crashing", async () => {
    await expect(
      openDatabase({
        url: "postgres://cgs:cgs@127.0.0.1:1/nowhere",
        schema: testSchema,
        migrationsFolder,
        pool: { connectionTimeoutMs: 1000 },
      }),
    ).rejects.toThrow();
  });
});
