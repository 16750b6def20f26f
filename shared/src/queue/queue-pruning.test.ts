import { randomUUID } from "node:crypto";
import { openTestDatabase, testDatabaseKinds, type OpenedTestDatabase } from "../testing/db";
import { testMigrationsFolder } from "../testing/test-migrations";
import { outboxTable, processedEventsTable, testSchema } from "../testing/test-schema";
import { pruneQueueTables } from "./queue-pruning";

const HOUR = 3_600_000;

describe.each(testDatabaseKinds)("pruning the queue tables on %s", (kind) => {
  let database: OpenedTestDatabase<typeof testSchema>;
  beforeAll(async () => {
    database = await openTestDatabase(kind, "shared_prune", {
      schema: testSchema,
      migrationsFolder: testMigrationsFolder,
    });
  });
  afterAll(() => database.destroy());

  it("when rows are past their retention, then only sent outbox rows and old processed-event ids are deleted", async () => {
    const now = new Date("2026-11-23T12:00:00Z");
    const ago = (hours: number) => new Date(now.getTime() - hours * HOUR);
    const outbox = (sentAt: Date | null) => ({
      eventId: randomUUID(),
      eventType: "session.started",
      destination: "q",
      payload: {} as never,
      createdAt: ago(400),
      sentAt,
    });
    await database.db.insert(outboxTable).values([outbox(ago(25)), outbox(ago(23)), outbox(null)]);
    const processed = (hours: number) => ({ eventId: randomUUID(), eventType: "x", processedAt: ago(hours) });
    await database.db.insert(processedEventsTable).values([processed(337), processed(335), processed(1)]);

    const report = await pruneQueueTables(
      database.db,
      { sentOutboxRetentionMs: 24 * HOUR, processedEventRetentionMs: 336 * HOUR, batchSize: 1 },
      now,
    );

    expect(report).toEqual({ outbox: 1, processedEvents: 1 });
    const kept = await database.db.select().from(outboxTable);
    expect(kept.map((r) => r.sentAt?.getTime() ?? null).sort()).toEqual([ago(23).getTime(), null].sort());
    expect(await database.db.select().from(processedEventsTable)).toHaveLength(2);
  });
});
