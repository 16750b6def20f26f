import type { SQSClient } from "@aws-sdk/client-sqs";
import { eq, inArray } from "drizzle-orm";
import pino from "pino";
import { openDatabase, type OpenedDatabase } from "../db/open-database";
import { outboxTable } from "../db/shared-tables";
import { createEvent, type EventEnvelope } from "../events";
import { openTestDatabase, testDatabaseKinds, type OpenedTestDatabase } from "../testing/db";
import {
  createTestQueue,
  createTestSqsClient,
  drainQueue,
  waitUntil,
  type TestQueue,
} from "../testing/queue";
import { testMigrationsFolder } from "../testing/test-migrations";
import { handledEventsTable, testSchema } from "../testing/test-schema";
import { startConsumer } from "./event-consumer";
import { createQueueUrlResolver } from "./event-routes";
import { enqueueEvent } from "./outbox";
import { startOutboxRelay, type OutboxRelay, type OutboxRelayOptions } from "./outbox-relay";

type TestSchema = typeof testSchema;
const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? "silent" });

function purgeEvent(n = 0): EventEnvelope<"account.purge"> {
  return createEvent("account.purge", `acc-${n}`, {
    identityUserId: `user-${n}`,
    requestedAt: new Date().toISOString(),
  });
}

/** An SQS client whose sends can be observed or sabotaged around the real one. */
function interceptSqs(
  real: SQSClient,
  around: (send: () => Promise<unknown>) => Promise<unknown>,
): SQSClient {
  return {
    send: (command: Parameters<SQSClient["send"]>[0]) => around(() => real.send(command)),
  } as unknown as SQSClient;
}

describe.each(testDatabaseKinds)("outbox relay on %s", (kind) => {
  const sqs = createTestSqsClient();
  const resolveQueueUrl = createQueueUrlResolver(sqs);
  let database: OpenedTestDatabase<TestSchema>;
  const relays: OutboxRelay[] = [];
  const queues: TestQueue[] = [];

  beforeAll(async () => {
    database = await openTestDatabase(kind, "shared_outbox", {
      schema: testSchema,
      migrationsFolder: testMigrationsFolder,
    });
  });
  afterEach(async () => {
    await Promise.all(relays.splice(0).map((r) => r.stop()));
    await Promise.all(queues.splice(0).map((q) => q.remove()));
  });
  afterAll(async () => {
    await database.destroy();
  });

  const newQueue = async () => {
    const queue = await createTestQueue(sqs, `outbox-${kind}`);
    queues.push(queue);
    return queue;
  };
  const relay = (options: Partial<OutboxRelayOptions> = {}) => {
    const started = startOutboxRelay({
      db: database.db,
      sqs,
      resolveQueueUrl,
      intervalMs: 50,
      logger,
      ...options,
    });
    relays.push(started);
    return started;
  };
  const outboxRows = (events: EventEnvelope[]) =>
    database.db
      .select()
      .from(outboxTable)
      .where(
        inArray(
          outboxTable.eventId,
          events.map((e) => e.id),
        ),
      );
  const allSent = async (events: EventEnvelope[]) => {
    const rows = await outboxRows(events);
    return rows.length > 0 && rows.every((r) => r.sentAt !== null);
  };

  it("when the enqueuing transaction rolls back, then nothing is sent; when it commits, then the event is sent once per destination", async () => {
    const first = await newQueue();
    const second = await newQueue();
    const rolledBack = purgeEvent(1);
    const committed = purgeEvent(2);
    await expect(
      database.withTransaction(async (tx) => {
        await enqueueEvent(tx, rolledBack, first.name);
        throw new Error("business rule failed");
      }),
    ).rejects.toThrow("business rule failed");
    await database.withTransaction((tx) => enqueueEvent(tx, committed, [first.name, second.queueUrl]));

    relay();
    await waitUntil(() => allSent([committed]), { description: "committed rows sent" });
    expect(await outboxRows([rolledBack])).toHaveLength(0);
    for (const queue of [first, second]) {
      const messages = await drainQueue(sqs, queue.queueUrl);
      expect(messages.map((m) => JSON.parse(m.Body ?? "").id)).toEqual([committed.id]);
    }
  });

  it("when SQS rejects a send, then the row is retried with backoff and sent later", async () => {
    const queue = await newQueue();
    const event = purgeEvent(3);
    await database.withTransaction((tx) => enqueueEvent(tx, event, queue.name));
    let calls = 0;
    const flaky = interceptSqs(sqs, async (send) => {
      calls += 1;
      if (calls === 1) throw new Error("ServiceUnavailable");
      return send();
    });
    relay({ sqs: flaky, retryBaseMs: 300 });
    await waitUntil(() => allSent([event]), { description: "row sent after retry" });
    const [row] = await outboxRows([event]);
    expect(row).toMatchObject({ attempts: 2, lastError: null });
    expect((await drainQueue(sqs, queue.queueUrl)).map((m) => JSON.parse(m.Body ?? "").id)).toEqual([
      event.id,
    ]);
  });

  it("when a relay dies between send and mark, then another relay re-sends after the lease and the consumer handles it once", async () => {
    const queue = await newQueue();
    const event = purgeEvent(4);
    await database.withTransaction((tx) => enqueueEvent(tx, event, queue.name));

    let release!: () => void;
    const frozen = new Promise<void>((resolve) => (release = resolve));
    let sentByDoomed = false;
    const dying = interceptSqs(sqs, async (send) => {
      await send();
      sentByDoomed = true;
      await frozen; // the process "dies" here: the send happened, the mark never does
      throw new Error("process killed");
    });
    const doomed = startOutboxRelay({
      db: database.db,
      sqs: dying,
      resolveQueueUrl,
      intervalMs: 60_000,
      claimTimeoutMs: 1_000,
      logger,
    });
    await waitUntil(() => sentByDoomed, { description: "first send" });
    relay({ claimTimeoutMs: 1_000 });
    await waitUntil(() => allSent([event]), { timeoutMs: 10_000, description: "re-sent and marked" });
    release();
    await doomed.stop();

    const consumer = startConsumer<TestSchema>({
      sqs,
      db: database.db,
      queueUrl: queue.queueUrl,
      waitTimeSeconds: 1,
      logger,
      handlers: {
        "account.purge": async (received, tx) => {
          await tx.insert(handledEventsTable).values({ eventId: received.id, eventType: received.type });
        },
      },
    });
    try {
      await waitUntil(
        async () =>
          (
            await database.db
              .select()
              .from(handledEventsTable)
              .where(eq(handledEventsTable.eventId, event.id))
          ).length > 0,
        { description: "handled" },
      );
      // Give the duplicate time to arrive and be acknowledged.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
    } finally {
      await consumer.stop();
    }
    const handled = await database.db
      .select()
      .from(handledEventsTable)
      .where(eq(handledEventsTable.eventId, event.id));
    expect(handled).toHaveLength(1);
    const [row] = await outboxRows([event]);
    expect(row?.attempts).toBe(2);
    expect(await drainQueue(sqs, queue.queueUrl)).toHaveLength(0);
  });
});

describe("outbox relay replicas on postgres", () => {
  const sqs = createTestSqsClient();
  let first: OpenedTestDatabase<TestSchema>;
  let second: OpenedDatabase<TestSchema>;
  let queue: TestQueue;

  beforeAll(async () => {
    first = await openTestDatabase("postgres", "shared_relays", {
      schema: testSchema,
      migrationsFolder: testMigrationsFolder,
    });
    second = await openDatabase({
      url: first.url,
      schema: testSchema,
      migrationsFolder: testMigrationsFolder,
    });
    queue = await createTestQueue(sqs, "outbox-replicas");
  });
  afterAll(async () => {
    await queue.remove();
    await second.close();
    await first.destroy();
  });

  it("when two relays on separate pools run at once, then every committed row is sent exactly once", async () => {
    const events = Array.from({ length: 60 }, (_, i) => purgeEvent(100 + i));
    await first.withTransaction(async (tx) => {
      for (const event of events) await enqueueEvent(tx, event, queue.name);
    });
    const sendsByRelay = [0, 0];
    const counting = (relayIndex: number) =>
      interceptSqs(sqs, (send) => {
        sendsByRelay[relayIndex] = (sendsByRelay[relayIndex] ?? 0) + 1;
        return send();
      });
    const resolveQueueUrl = createQueueUrlResolver(sqs);
    const relays = [first, second].map((d, i) =>
      startOutboxRelay({ db: d.db, sqs: counting(i), resolveQueueUrl, intervalMs: 10, batchSize: 4, logger }),
    );
    try {
      await waitUntil(
        async () => {
          const rows = await first.db.select().from(outboxTable);
          return rows.length === events.length && rows.every((r) => r.sentAt !== null);
        },
        { timeoutMs: 20_000, description: "all rows sent" },
      );
    } finally {
      await Promise.all(relays.map((r) => r.stop()));
    }
    // Both replicas did part of the work, and together sent each row once.
    expect(sendsByRelay.every((n) => n > 0)).toBe(true);
    expect(sendsByRelay[0]! + sendsByRelay[1]!).toBe(events.length);
    const received = await drainQueue(sqs, queue.queueUrl);
    const ids = received.map((m) => JSON.parse(m.Body ?? "").id as string);
    expect(ids).toHaveLength(events.length);
    expect(new Set(ids)).toEqual(new Set(events.map((e) => e.id)));
    const rows = await first.db.select().from(outboxTable);
    expect(rows.every((r) => r.attempts === 1)).toBe(true);
  });
});
