import { DeleteMessageCommand, SendMessageCommand, type Message, type SQSClient } from "@aws-sdk/client-sqs";
import { SpanKind, SpanStatusCode, trace, type Span } from "@opentelemetry/api";
import { parseEvent, type AnyEvent, type EventEnvelope, type EventType } from "../events";
import { silentLogger, type ComponentLogger } from "../db/component-logger";
import type { Database, DatabaseSchema, Transaction } from "../db/database-types";
import { processedEventsTable } from "../db/shared-tables";
import { metrics } from "../metrics/platform-metrics";
import { recordSpanError, sharedTracer } from "../tracing/span-helpers";
import { extractTraceContext } from "../tracing/trace-carrier";
import { traceCarrierFromAttributes } from "./message-attributes";
import { startQueuePoller } from "./queue-poller";

export type EventHandler<T extends EventType, TSchema extends DatabaseSchema = DatabaseSchema> = (
  event: EventEnvelope<T>,
  tx: Transaction<TSchema>,
) => Promise<void>;

/** One handler per event type the service consumes; each runs in the transaction that records the event id. */
export type EventHandlers<TSchema extends DatabaseSchema = DatabaseSchema> = {
  [T in EventType]?: EventHandler<T, TSchema>;
};

export interface ConsumerOptions<TSchema extends DatabaseSchema> {
  sqs: SQSClient;
  queueUrl: string;
  handlers: EventHandlers<TSchema>;
  db: Database<TSchema>;
  /** Long polling; 20 s is the SQS maximum. */
  waitTimeSeconds?: number;
  /** 1–10 messages per receive. */
  maxMessages?: number;
  /** Overrides the queue's visibility timeout for messages this consumer receives (seconds). */
  visibilityTimeout?: number;
  /**
   * Where messages that can never be handled (bad JSON, invalid envelope, no handler) go at once.
   * Unset: they are left undeleted and the queue's RedrivePolicy moves them after maxReceiveCount.
   */
  deadLetterQueueUrl?: string;
  /** The queue's RedrivePolicy maxReceiveCount: a failure on that receive counts as dead-lettered. */
  maxReceiveCount?: number;
  /** Pause after a failed receive (network, throttling) before polling again. */
  receiveErrorBackoffMs?: number;
  logger?: ComponentLogger;
}

export interface Consumer {
  /** Stops polling and resolves once the messages in hand are finished. */
  stop(): Promise<void>;
}

type Outcome = "handled" | "duplicate" | "failed" | "rejected";

/**
 * Long-polls one queue. A message is deleted only after its handler and the insert of its event id
 * committed together, so a failure leaves it for redelivery (and the DLQ after maxReceiveCount) and a
 * redelivered event is acknowledged without running the handler again.
 */
export function startConsumer<TSchema extends DatabaseSchema>(options: ConsumerOptions<TSchema>): Consumer {
  const logger = options.logger ?? silentLogger;
  const { sqs, queueUrl, db } = options;
  const queueName = queueUrl.split("/").pop() ?? queueUrl;

  const deleteMessage = async (message: Message) => {
    try {
      await sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: message.ReceiptHandle }));
    } catch (err) {
      // Not fatal: the message comes back after the visibility timeout and is deduplicated.
      logger.warn({ err, messageId: message.MessageId }, "could not delete handled message");
    }
  };

  const reject = async (message: Message, reason: string, span: Span): Promise<Outcome> => {
    span.setStatus({ code: SpanStatusCode.ERROR, message: reason });
    logger.error({ messageId: message.MessageId, queue: queueName, reason }, "unprocessable message");
    if (!options.deadLetterQueueUrl) return "rejected";
    try {
      await sqs.send(
        new SendMessageCommand({
          QueueUrl: options.deadLetterQueueUrl,
          MessageBody: message.Body ?? "",
          MessageAttributes: message.MessageAttributes,
        }),
      );
      await deleteMessage(message);
      metrics.deadLettered.inc();
    } catch (err) {
      logger.error(
        { err, messageId: message.MessageId },
        "could not move message to the DLQ; left for redrive",
      );
    }
    return "rejected";
  };

  const runHandler = async (event: AnyEvent): Promise<"handled" | "duplicate"> => {
    const handler = options.handlers[event.type] as EventHandler<EventType, TSchema> | undefined;
    if (!handler) throw new Error(`no handler for ${event.type}`);
    return db.transaction(async (tx) => {
      const inserted = await tx
        .insert(processedEventsTable)
        .values({ eventId: event.id, eventType: event.type })
        .onConflictDoNothing()
        .returning({ eventId: processedEventsTable.eventId });
      if (inserted.length === 0) return "duplicate";
      await handler(event, tx);
      return "handled";
    });
  };

  const processMessage = async (message: Message, span: Span): Promise<Outcome> => {
    let body: unknown;
    try {
      body = JSON.parse(message.Body ?? "");
    } catch {
      return reject(message, "body is not JSON", span);
    }
    const parsed = parseEvent(body);
    if (!parsed.success) return reject(message, parsed.error, span);
    const { event } = parsed;
    span.setAttributes({ "cgs.event.type": event.type, "cgs.event.id": event.id });
    if (!options.handlers[event.type]) return reject(message, `no handler for ${event.type}`, span);

    const log = { eventId: event.id, eventType: event.type, messageId: message.MessageId, queue: queueName };
    try {
      const outcome = await runHandler(event);
      await deleteMessage(message);
      metrics.consumerLag.labels(event.type).observe((Date.now() - Date.parse(event.occurredAt)) / 1000);
      logger.info(
        { ...log, outcome },
        outcome === "duplicate" ? "duplicate event acknowledged" : "event handled",
      );
      return outcome;
    } catch (err) {
      recordSpanError(span, err);
      const receiveCount = message.Attributes?.ApproximateReceiveCount;
      if (options.maxReceiveCount && Number(receiveCount) >= options.maxReceiveCount)
        metrics.deadLettered.inc();
      logger.warn({ ...log, err, receiveCount }, "event handler failed; message left for redelivery");
      return "failed";
    }
  };

  const handle = async (message: Message): Promise<void> => {
    const parent = extractTraceContext(traceCarrierFromAttributes(message.MessageAttributes));
    const producer = trace.getSpanContext(parent);
    await sharedTracer().startActiveSpan(
      `${queueName} process`,
      {
        kind: SpanKind.CONSUMER,
        links: producer ? [{ context: producer }] : [],
        attributes: {
          "messaging.system": "aws_sqs",
          "messaging.operation.type": "process",
          "messaging.destination.name": queueName,
          "messaging.message.id": message.MessageId ?? "",
        },
      },
      parent,
      async (span) => {
        try {
          span.setAttribute("cgs.outcome", await processMessage(message, span));
        } catch (err) {
          recordSpanError(span, err);
          logger.error({ err, messageId: message.MessageId }, "unexpected consumer error");
        } finally {
          span.end();
        }
      },
    );
  };

  return startQueuePoller({
    sqs,
    queueUrl,
    waitTimeSeconds: options.waitTimeSeconds,
    maxMessages: options.maxMessages,
    visibilityTimeout: options.visibilityTimeout,
    receiveErrorBackoffMs: options.receiveErrorBackoffMs,
    logger,
    handleBatch: async (messages) => {
      await Promise.all(messages.map(handle));
    },
  });
}
