import { GetQueueAttributesCommand, type SQSClient } from "@aws-sdk/client-sqs";
import type { Logger } from "pino";
import type { Database, DatabaseSchema } from "../db";
import type { EventType } from "../events";
import type { Closer } from "../http";
import { metrics, onScrape } from "../metrics";
import {
  createQueueUrlResolver,
  createSqsClient,
  destinationsFor,
  enqueueEvent,
  ensureQueue,
  outboxBacklog,
  platformEventRoutes,
  pruneQueueTables,
  startConsumer,
  startOutboxRelay,
  type EventHandlers,
  type EventRoutes,
} from "../queue";
import type { AnyEvent } from "../events";
import type { SqlExecutor } from "../db";
import { startPeriodicWorker } from "./periodic-worker";

export interface EventWorkerConfig {
  AWS_REGION: string;
  AWS_ENDPOINT_URL?: string;
  QUEUE_NAME: string;
  QUEUE_NAME_PREFIX: string;
  CREATE_QUEUES: boolean;
  QUEUE_MAX_RECEIVE_COUNT: number;
  QUEUE_WAIT_SECONDS: number;
  OUTBOX_RELAY_INTERVAL_MS: number;
  QUEUE_PRUNE_INTERVAL_MS: number;
  OUTBOX_SENT_RETENTION_HOURS: number;
  PROCESSED_EVENT_RETENTION_HOURS: number;
}

export interface EventWorkersOptions<TSchema extends DatabaseSchema> {
  config: EventWorkerConfig;
  db: Database<TSchema>;
  logger: Logger;
  /** Events this service consumes from its own queue; omit for a publish-only service. */
  handlers?: EventHandlers<TSchema>;
  sqs?: SQSClient;
}

export interface EventWorkers {
  sqs: SQSClient;
  closers: Closer[];
}

/** SQS client for a service's config; credentials come from the SDK's default chain (env, IRSA role). */
export function sqsClientFromConfig(
  config: Pick<EventWorkerConfig, "AWS_REGION" | "AWS_ENDPOINT_URL">,
): SQSClient {
  return createSqsClient({ region: config.AWS_REGION, endpoint: config.AWS_ENDPOINT_URL });
}

/** The platform's routes with every queue name prefixed (tests isolate themselves with a prefix). */
export function prefixedRoutes(prefix: string, routes: EventRoutes = platformEventRoutes): EventRoutes {
  return Object.fromEntries(
    Object.entries(routes).map(([type, queues]) => [type, (queues ?? []).map((q) => prefix + q)]),
  );
}

/** Writes an event to the outbox inside the caller's transaction, addressed by the platform's routing table. */
export function publishInTransaction(tx: SqlExecutor, event: AnyEvent, prefix = ""): Promise<void> {
  return enqueueEvent(tx, event, destinationsFor(prefixedRoutes(prefix), event.type as EventType));
}

/** Puts events in the outbox of the caller's transaction; the queue-name prefix is bound once, at composition. */
export interface OutboxPublisher {
  publish(tx: SqlExecutor, event: AnyEvent): Promise<void>;
}

export function createOutboxPublisher(queuePrefix = ""): OutboxPublisher {
  return { publish: (tx, event) => publishInTransaction(tx, event, queuePrefix) };
}

/**
 * Starts the outbox relay, the pruning of sent outbox rows and old processed-event ids and, when the
 * service consumes events, the long-polling consumer on its own queue
 * (created with its DLQ when CREATE_QUEUES is set). Returns closers for runService's drain.
 */
export async function startEventWorkers<TSchema extends DatabaseSchema>(
  options: EventWorkersOptions<TSchema>,
): Promise<EventWorkers> {
  const { config, logger } = options;
  const sqs = options.sqs ?? sqsClientFromConfig(config);
  const closers: Closer[] = [];
  const ownQueue = config.QUEUE_NAME_PREFIX + config.QUEUE_NAME;
  if (config.CREATE_QUEUES) {
    // Every destination must exist before the relay sends to it, and this service's own queue before it polls.
    const names = new Set([...Object.values(prefixedRoutes(config.QUEUE_NAME_PREFIX)).flat(), ownQueue]);
    for (const name of names) {
      await ensureQueue(sqs, name, {
        maxReceiveCount: config.QUEUE_MAX_RECEIVE_COUNT,
        visibilityTimeout: 30,
      });
    }
  }
  const relay = startOutboxRelay({
    db: options.db,
    sqs,
    resolveQueueUrl: createQueueUrlResolver(sqs),
    intervalMs: config.OUTBOX_RELAY_INTERVAL_MS,
    logger: logger.child({ component: "outbox-relay" }),
  });
  closers.push(() => relay.stop());
  const stopBacklogGauge = onScrape(async () => {
    const backlog = await outboxBacklog(options.db);
    metrics.outboxBacklog.set(backlog.rows);
    metrics.outboxOldestAge.set(backlog.oldestAgeSeconds);
  });
  closers.push(stopBacklogGauge);
  const hours = 3_600_000;
  const pruning = startPeriodicWorker(
    "queue-pruning",
    config.QUEUE_PRUNE_INTERVAL_MS,
    () =>
      pruneQueueTables(options.db, {
        sentOutboxRetentionMs: config.OUTBOX_SENT_RETENTION_HOURS * hours,
        processedEventRetentionMs: config.PROCESSED_EVENT_RETENTION_HOURS * hours,
      }),
    logger.child({ component: "queue-pruning" }),
  );
  closers.unshift(() => pruning.stop());
  if (options.handlers) {
    const resolve = createQueueUrlResolver(sqs);
    const deadLetterQueueUrl = await resolve(`${ownQueue}-dlq`);
    const consumer = startConsumer({
      sqs,
      queueUrl: await resolve(ownQueue),
      deadLetterQueueUrl,
      maxReceiveCount: config.QUEUE_MAX_RECEIVE_COUNT,
      handlers: options.handlers,
      db: options.db,
      waitTimeSeconds: config.QUEUE_WAIT_SECONDS,
      logger: logger.child({ component: "consumer", queue: ownQueue }),
    });
    closers.unshift(() => consumer.stop());
    closers.push(onScrape(() => refreshDlqDepth(sqs, deadLetterQueueUrl)));
  }
  closers.push(() => sqs.destroy());
  return { sqs, closers };
}

async function refreshDlqDepth(sqs: SQSClient, deadLetterQueueUrl: string): Promise<void> {
  const out = await sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: deadLetterQueueUrl,
      AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    }),
  );
  const visible = Number(out.Attributes?.ApproximateNumberOfMessages ?? 0);
  const inFlight = Number(out.Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0);
  metrics.dlqDepth.set(visible + inFlight);
}
