import { GetQueueAttributesCommand, type SQSClient } from "@aws-sdk/client-sqs";
import { SpanKind, trace } from "@opentelemetry/api";
import { eq } from "drizzle-orm";
import pino from "pino";
import { processedEventsTable } from "../db/shared-tables";
import { createEvent, type EventEnvelope } from "../events";
import { openTestDatabase, testDatabaseKinds, type OpenedTestDatabase } from "../testing/db";
import {
  createTestQueue,
  createTestSqsClient,
  drainQueue,
  waitUntil,
  type TestQueue,
} from "../testing/queue";
import { setupTestTracing, type TestTracing } from "../testing/tracing";
import { testMigrationsFolder } from "../testing/test-migrations";
import { handledEventsTable, testSchema } from "../testing/test-schema";
import { withSpan } from "../tracing/span-helpers";
import { startConsumer, type Consumer, type ConsumerOptions } from "./event-consumer";
import { createEventPublisher, sendEventMessage } from "./event-publisher";
import { createQueueUrlResolver } from "./event-routes";
import { createSqsClient } from "./sqs-client";

type TestSchema = typeof testSchema;

const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? "silent" });

function sessionStarted(accountId = "acc-1"): EventEnvelope<"session.started"> {
  return createEvent("session.started", accountId, {
    sessionId: "sess-1",
    instanceId: "i-123",
    ratePerMinute: 10,
    currency: "EUR",
    startedAt: new Date().toISOString(),
  });
}

async function queueDepth(sqs: SQSClient, queueUrl: string): Promise<number> {
  const out = await sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: queueUrl,
      AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    }),
  );
  return (
    Number(out.Attributes?.ApproximateNumberOfMessages ?? 0) +
    Number(out.Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0)
  );
}

let tracing: TestTracing;
beforeAll(() => {
  tracing = setupTestTracing({ instrument: false });
});
afterAll(async () => {
  await tracing.shutdown();
});

describe.each(testDatabaseKinds)("event consumer on %s", (kind) => {
  const sqs = createTestSqsClient();
  let database: OpenedTestDatabase<TestSchema>;
  const consumers: Consumer[] = [];
  const queues: TestQueue[] = [];

  beforeAll(async () => {
    database = await openTestDatabase(kind, "shared_consumer", {
      schema: testSchema,
      migrationsFolder: testMigrationsFolder,
    });
  });
  afterEach(async () => {
    await Promise.all(consumers.splice(0).map((c) => c.stop()));
    await Promise.all(queues.splice(0).map((q) => q.remove()));
  });
  afterAll(async () => {
    await database.destroy();
  });

  const newQueue = async (options: { maxReceiveCount?: number; visibilityTimeout?: number } = {}) => {
    const queue = await createTestQueue(sqs, `consumer-${kind}`, options);
    queues.push(queue);
    return queue;
  };

  const consume = (
    options: Partial<ConsumerOptions<TestSchema>> & Pick<ConsumerOptions<TestSchema>, "queueUrl">,
  ) => {
    const consumer = startConsumer<TestSchema>({
      sqs,
      db: database.db,
      waitTimeSeconds: 1,
      logger,
      handlers: {},
      ...options,
    });
    consumers.push(consumer);
    return consumer;
  };

  const handledCount = async (eventId: string) =>
    (await database.db.select().from(handledEventsTable).where(eq(handledEventsTable.eventId, eventId)))
      .length;

  it("when an event is published to two queues, then each gets it with trace attributes and the consumer continues the trace", async () => {
    const consumed = await newQueue();
    const audit = await newQueue();
    const publisher = createEventPublisher({
      sqs,
      routes: { "session.started": [consumed.name, audit.name] },
      resolveQueueUrl: createQueueUrlResolver(sqs),
    });
    const event = sessionStarted();
    tracing.reset();
    const rootTraceId = await withSpan("test request", { kind: SpanKind.SERVER }, async (span) => {
      await publisher.publish(event);
      return span.spanContext().traceId;
    });

    const seen: EventEnvelope<"session.started">[] = [];
    consume({
      queueUrl: consumed.queueUrl,
      handlers: {
        "session.started": async (received, tx) => {
          seen.push(received);
          await tx.insert(handledEventsTable).values({ eventId: received.id, eventType: received.type });
        },
      },
    });
    await waitUntil(() => handledCount(event.id), { description: "event handled" });
    expect(seen).toEqual([event]);

    const [raw, ...rest] = await drainQueue(sqs, audit.queueUrl);
    expect(rest).toHaveLength(0);
    expect(JSON.parse(raw?.Body ?? "")).toEqual(event);
    expect(raw?.MessageAttributes?.["cgs-event-type"]?.StringValue).toBe("session.started");
    expect(raw?.MessageAttributes?.["cgs-event-id"]?.StringValue).toBe(event.id);
    expect(raw?.MessageAttributes?.traceparent?.StringValue).toMatch(
      new RegExp(`^00-${rootTraceId}-[0-9a-f]{16}-01$`),
    );

    const consumerSpan = await waitUntil(() =>
      tracing.spans().find((s) => s.kind === SpanKind.CONSUMER && s.attributes["cgs.event.id"] === event.id),
    );
    const publishSpan = tracing
      .spans()
      .find(
        (s) => s.kind === SpanKind.PRODUCER && s.attributes["messaging.destination.name"] === consumed.name,
      );
    expect(consumerSpan.spanContext().traceId).toBe(rootTraceId);
    expect(consumerSpan.parentSpanContext?.spanId).toBe(publishSpan?.spanContext().spanId);
    expect(consumerSpan.attributes["cgs.outcome"]).toBe("handled");
    expect(trace.getActiveSpan()).toBeUndefined();
  });

  it("when the same event is delivered twice, then the handler runs once and both messages are acknowledged", async () => {
    const queue = await newQueue();
    const event = sessionStarted();
    await sendEventMessage(sqs, queue.queueUrl, event);
    await sendEventMessage(sqs, queue.queueUrl, event);
    let calls = 0;
    consume({
      queueUrl: queue.queueUrl,
      maxMessages: 1,
      handlers: {
        "session.started": async (received, tx) => {
          calls += 1;
          await tx.insert(handledEventsTable).values({ eventId: received.id, eventType: received.type });
        },
      },
    });
    await waitUntil(async () => (await queueDepth(sqs, queue.queueUrl)) === 0, {
      description: "queue empty",
    });
    expect(calls).toBe(1);
    expect(await handledCount(event.id)).toBe(1);
    const processed = await database.db
      .select()
      .from(processedEventsTable)
      .where(eq(processedEventsTable.eventId, event.id));
    expect(processed).toHaveLength(1);
  });

  it("when a handler fails once, then its writes are rolled back and the redelivered message is handled", async () => {
    const queue = await newQueue({ maxReceiveCount: 5, visibilityTimeout: 1 });
    const event = sessionStarted();
    await sendEventMessage(sqs, queue.queueUrl, event);
    let calls = 0;
    consume({
      queueUrl: queue.queueUrl,
      handlers: {
        "session.started": async (received, tx) => {
          calls += 1;
          await tx.insert(handledEventsTable).values({ eventId: received.id, eventType: received.type });
          if (calls === 1) throw new Error("transient failure");
        },
      },
    });
    await waitUntil(async () => (await queueDepth(sqs, queue.queueUrl)) === 0 && calls >= 2, {
      description: "redelivered and handled",
    });
    expect(calls).toBe(2);
    expect(await handledCount(event.id)).toBe(1);
  });

  it("when a handler always fails, then the message is redelivered and lands in the DLQ after maxReceiveCount", async () => {
    const queue = await newQueue({ maxReceiveCount: 2, visibilityTimeout: 1 });
    const event = sessionStarted();
    await sendEventMessage(sqs, queue.queueUrl, event);
    let calls = 0;
    consume({
      queueUrl: queue.queueUrl,
      handlers: {
        "session.started": async (received, tx) => {
          calls += 1;
          await tx.insert(handledEventsTable).values({ eventId: received.id, eventType: received.type });
          throw new Error("permanent failure");
        },
      },
    });
    const inDlq = await waitUntil(
      async () => {
        const messages = await drainQueue(sqs, queue.deadLetterQueueUrl, { waitTimeSeconds: 0 });
        return messages.length > 0 ? messages : undefined;
      },
      { timeoutMs: 15_000, intervalMs: 500, description: "message in DLQ" },
    );
    expect(inDlq.map((m) => JSON.parse(m.Body ?? "").id)).toEqual([event.id]);
    expect(calls).toBe(2);
    expect(await handledCount(event.id)).toBe(0);
    const processed = await database.db
      .select()
      .from(processedEventsTable)
      .where(eq(processedEventsTable.eventId, event.id));
    expect(processed).toHaveLength(0);
  });

  it("when an envelope is invalid and no DLQ URL is given, then it is left for redrive and the consumer keeps working", async () => {
    const queue = await newQueue({ maxReceiveCount: 1, visibilityTimeout: 1 });
    const bad = { ...sessionStarted(), data: { sessionId: 42 } } as unknown as EventEnvelope;
    await sendEventMessage(sqs, queue.queueUrl, bad);
    const good = sessionStarted();
    await sendEventMessage(sqs, queue.queueUrl, good);
    consume({
      queueUrl: queue.queueUrl,
      handlers: {
        "session.started": async (received, tx) => {
          await tx.insert(handledEventsTable).values({ eventId: received.id, eventType: received.type });
        },
      },
    });
    await waitUntil(() => handledCount(good.id), { description: "valid event handled" });
    const inDlq = await waitUntil(
      async () => {
        const messages = await drainQueue(sqs, queue.deadLetterQueueUrl, { waitTimeSeconds: 0 });
        return messages.length > 0 ? messages : undefined;
      },
      { timeoutMs: 15_000, intervalMs: 500, description: "invalid message in DLQ" },
    );
    expect(inDlq.map((m) => JSON.parse(m.Body ?? "").id)).toEqual([bad.id]);
  });

  it("when a message is not JSON or has no handler and a DLQ URL is given, then it is moved there at once", async () => {
    const queue = await newQueue({ maxReceiveCount: 5, visibilityTimeout: 30 });
    const noHandler = createEvent("credits.exhausted", "acc-2", {
      sessionId: "s-2",
      balance: 0,
      currency: "EUR",
    });
    await sendEventMessage(sqs, queue.queueUrl, noHandler);
    const { SendMessageCommand } = await import("@aws-sdk/client-sqs");
    await sqs.send(new SendMessageCommand({ QueueUrl: queue.queueUrl, MessageBody: "{not json" }));
    consume({
      queueUrl: queue.queueUrl,
      deadLetterQueueUrl: queue.deadLetterQueueUrl,
      handlers: { "session.started": async () => undefined },
    });
    await waitUntil(async () => (await queueDepth(sqs, queue.queueUrl)) === 0, {
      description: "source queue empty",
    });
    const inDlq = await drainQueue(sqs, queue.deadLetterQueueUrl);
    expect(inDlq.map((m) => m.Body).sort()).toEqual([JSON.stringify(noHandler), "{not json"].sort());
  });

  it("when SQS cannot be reached, then the consumer keeps retrying without crashing and stop() still returns", async () => {
    const unreachable = createSqsClient({
      region: "us-east-1",
      endpoint: "http://127.0.0.1:1",
      credentials: { accessKeyId: "test", secretAccessKey: "test" },
    });
    const errors: unknown[] = [];
    const consumer = startConsumer<TestSchema>({
      sqs: unreachable,
      db: database.db,
      queueUrl: "http://127.0.0.1:1/000000000000/nowhere",
      receiveErrorBackoffMs: 50,
      logger: { ...logger, error: (obj: unknown) => void errors.push(obj) } as unknown as typeof logger,
      handlers: {},
    });
    await waitUntil(() => errors.length >= 2, { description: "two failed receives" });
    await consumer.stop();
    unreachable.destroy();
  });

  it("when stop() is called while a handler runs, then it waits for that handler to commit", async () => {
    const queue = await newQueue();
    const event = sessionStarted();
    await sendEventMessage(sqs, queue.queueUrl, event);
    let entered!: () => void;
    const handlerEntered = new Promise<void>((resolve) => (entered = resolve));
    const consumer = startConsumer<TestSchema>({
      sqs,
      db: database.db,
      queueUrl: queue.queueUrl,
      waitTimeSeconds: 1,
      logger,
      handlers: {
        "session.started": async (received, tx) => {
          entered();
          await new Promise((resolve) => setTimeout(resolve, 1_000));
          await tx.insert(handledEventsTable).values({ eventId: received.id, eventType: received.type });
        },
      },
    });
    await handlerEntered;
    await consumer.stop();
    expect(await handledCount(event.id)).toBe(1);
    expect(await queueDepth(sqs, queue.queueUrl)).toBe(0);
  });
});
