/**
 * A two-role process for the cross-process trace test, run as
 * `node --import <dist>/telemetry.js trace-fixture-service.js`:
 * ROLE=api answers POST /events by enqueueing an event in the outbox and relays it;
 * ROLE=worker consumes the queue. Both drain and flush spans on SIGTERM.
 */
import express from "express";
import pino from "pino";
import { openDatabase } from "../db/open-database";
import { createEvent } from "../events";
import { startConsumer } from "../queue/event-consumer";
import { createQueueUrlResolver } from "../queue/event-routes";
import { enqueueEvent } from "../queue/outbox";
import { startOutboxRelay } from "../queue/outbox-relay";
import { createSqsClient } from "../queue/sqs-client";
import { shutdownTelemetry } from "../tracing/telemetry-state";
import { handledEventsTable, testSchema } from "./test-schema";

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
}

async function main(): Promise<void> {
  const role = required("ROLE");
  const queueName = required("QUEUE_NAME");
  const logger = pino({ base: { role } });
  const database = await openDatabase({
    url: required("DATABASE_URL"),
    schema: testSchema,
    migrationsFolder: required("MIGRATIONS_FOLDER"),
    logger,
  });
  const sqs = createSqsClient({
    region: "us-east-1",
    endpoint: required("SQS_ENDPOINT"),
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
  });
  const resolveQueueUrl = createQueueUrlResolver(sqs);
  let stopRole: () => Promise<void>;

  if (role === "api") {
    const app = express();
    app.post("/events", async (_req, res) => {
      const event = createEvent("session.started", "acc-trace", {
        sessionId: "sess-trace",
        instanceId: "i-trace",
        ratePerMinute: 7,
        currency: "EUR",
        startedAt: new Date().toISOString(),
      });
      await database.withTransaction((tx) => enqueueEvent(tx, event, queueName));
      logger.info({ eventId: event.id }, "event enqueued");
      res.status(202).json({ id: event.id });
    });
    const server = app.listen(0, "127.0.0.1", () => {
      const address = server.address() as { port: number };
      process.stdout.write(`${JSON.stringify({ ready: true, port: address.port })}\n`);
    });
    const relay = startOutboxRelay({ db: database.db, sqs, resolveQueueUrl, intervalMs: 100, logger });
    stopRole = async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await relay.stop();
    };
  } else {
    const consumer = startConsumer({
      sqs,
      db: database.db,
      queueUrl: await resolveQueueUrl(queueName),
      waitTimeSeconds: 1,
      logger,
      handlers: {
        "session.started": async (event, tx) => {
          await tx.insert(handledEventsTable).values({ eventId: event.id, eventType: event.type });
          logger.info({ eventId: event.id }, "event handled");
        },
      },
    });
    process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
    stopRole = () => consumer.stop();
  }

  process.once("SIGTERM", () => {
    void (async () => {
      await stopRole();
      await database.close();
      await shutdownTelemetry();
      process.exit(0);
    })();
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
