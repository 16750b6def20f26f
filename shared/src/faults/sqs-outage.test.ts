import { SQSClient } from "@aws-sdk/client-sqs";
import { inArray } from "drizzle-orm";
import pino from "pino";
import { outboxTable } from "../db/shared-tables";
import { createEvent, type EventEnvelope } from "../events";
import { enqueueEvent } from "../queue/outbox";
import { startOutboxRelay } from "../queue/outbox-relay";
import { startCuttableProxy, type CuttableProxy } from "../testing/cuttable-proxy";
import { openTestDatabase, type OpenedTestDatabase } from "../testing/db";
import * as sqsTesting from "../testing/queue";
import { testMigrationsFolder } from "../testing/test-migrations";
import { testSchema } from "../testing/test-schema";

// Fault: SQS unreachable. The real moto (shared peer, never reset) sits behind a TCP hop in this process that
// the test cuts for a minute; the relay talks to SQS only through it.
jest.setTimeout(150_000);
const OUTAGE_MS = 60_000;

let proxy: CuttableProxy;
let database: OpenedTestDatabase<typeof testSchema>;
let queue: sqsTesting.TestQueue;
const direct = sqsTesting.createTestSqsClient();

beforeAll(async () => {
  const moto = new URL(process.env.SQS_ENDPOINT || process.env.AWS_ENDPOINT_URL || "http://127.0.0.1:5000");
  proxy = await startCuttableProxy({ host: moto.hostname, port: Number(moto.port || 80) });
  database = await openTestDatabase("postgres", "faults_sqs", {
    schema: testSchema,
    migrationsFolder: testMigrationsFolder,
  });
  queue = await sqsTesting.createTestQueue(direct, "faults-sqs");
});

afterAll(async () => {
  await queue?.remove();
  await database?.destroy();
  await proxy?.close();
});

function event(n: number): EventEnvelope<"account.purge"> {
  return createEvent("account.purge", `acc-sqs-${n}`, {
    identityUserId: `user-${n}`,
    requestedAt: new Date().toISOString(),
  });
}

/** The outbox rows of these events. */
const rowsOf = (events: EventEnvelope[]) => {
  const ids = events.map((e) => e.id);
  return database.db.select().from(outboxTable).where(inArray(outboxTable.eventId, ids));
};

describe("fault: SQS unreachable", () => {
  it("when SQS is cut off, then state changes keep committing, their events wait in the outbox, and all arrive once each when it returns", async () => {
    const throughProxy = new SQSClient({
      region: process.env.AWS_REGION || "us-east-1",
      endpoint: proxy.url,
      credentials: { accessKeyId: "test", secretAccessKey: "test" },
      useQueueUrlAsEndpoint: false,
      maxAttempts: 1,
      requestHandler: { connectionTimeout: 500, requestTimeout: 2_000 },
    });
    const relay = startOutboxRelay({
      db: database.db,
      sqs: throughProxy,
      resolveQueueUrl: () => queue.queueUrl,
      intervalMs: 100,
      retryBaseMs: 200,
      retryMaxMs: 1_000,
      logger: pino({ level: "silent" }),
    });
    const events: EventEnvelope[] = [];
    try {
      await proxy.cut();
      const outageEnds = Date.now() + OUTAGE_MS;
      let n = 0;
      while (Date.now() < outageEnds) {
        const e = event((n += 1));
        const started = Date.now();
        await database.withTransaction((tx) => enqueueEvent(tx, e, queue.name));
        // Committing never waits on SQS.
        expect(Date.now() - started).toBeLessThan(1_000);
        events.push(e);
        await new Promise((r) => setTimeout(r, 500));
      }
      const waiting = await rowsOf(events);
      expect(waiting).toHaveLength(events.length);
      expect(waiting.every((r) => r.sentAt === null)).toBe(true);
      expect(waiting.some((r) => r.attempts > 0)).toBe(true);

      await proxy.restore();
      await sqsTesting.waitUntil(
        async () => {
          const rows = await rowsOf(events);
          return rows.every((r) => r.sentAt !== null);
        },
        { timeoutMs: 30_000, description: "every waiting event sent after SQS returns" },
      );
    } finally {
      await proxy.restore();
      await relay.stop();
      throughProxy.destroy();
    }
    const received = (await sqsTesting.drainQueue(direct, queue.queueUrl)).map(
      (m) => (JSON.parse(m.Body ?? "") as { id: string }).id,
    );
    expect(received.sort()).toEqual(events.map((e) => e.id).sort());
  });
});
