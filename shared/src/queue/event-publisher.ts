import { SendMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import { SpanKind } from "@opentelemetry/api";
import { parseEvent, type EventEnvelope } from "../events";
import { withSpan } from "../tracing/span-helpers";
import { injectTraceCarrier, type TraceCarrier } from "../tracing/trace-carrier";
import { destinationsFor, type EventRoutes, type QueueUrlResolver } from "./event-routes";
import { eventMessageAttributes } from "./message-attributes";

/** Sends one envelope to one queue, carrying the trace of the active context (or the given carrier's). */
export async function sendEventMessage(
  sqs: SQSClient,
  queueUrl: string,
  event: EventEnvelope,
  carrier: TraceCarrier = injectTraceCarrier(),
): Promise<string | undefined> {
  const out = await sqs.send(
    new SendMessageCommand({
      QueueUrl: queueUrl,
      MessageBody: JSON.stringify(event),
      MessageAttributes: eventMessageAttributes(event, carrier),
    }),
  );
  return out.MessageId;
}

export interface EventPublisher {
  /** Sends the event to every queue routed for its type, now (not transactional: prefer the outbox). */
  publish(event: EventEnvelope): Promise<void>;
}

export interface EventPublisherOptions {
  sqs: SQSClient;
  routes: EventRoutes;
  resolveQueueUrl: QueueUrlResolver;
}

export function createEventPublisher(options: EventPublisherOptions): EventPublisher {
  return {
    async publish(event) {
      const parsed = parseEvent(event);
      if (!parsed.success) throw new Error(`refusing to publish ${parsed.error}`);
      const destinations = destinationsFor(options.routes, event.type);
      await Promise.all(
        destinations.map((destination) =>
          withSpan(
            `${destination} publish`,
            {
              kind: SpanKind.PRODUCER,
              attributes: {
                "messaging.system": "aws_sqs",
                "messaging.operation.type": "send",
                "messaging.destination.name": destination,
                "cgs.event.type": event.type,
                "cgs.event.id": event.id,
              },
            },
            async () => {
              await sendEventMessage(options.sqs, await options.resolveQueueUrl(destination), event);
            },
          ),
        ),
      );
    },
  };
}
