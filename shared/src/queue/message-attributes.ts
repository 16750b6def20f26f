import type { MessageAttributeValue } from "@aws-sdk/client-sqs";
import type { EventEnvelope } from "../events";
import type { TraceCarrier } from "../tracing/trace-carrier";

export const EVENT_TYPE_ATTRIBUTE = "cgs-event-type";
export const EVENT_ID_ATTRIBUTE = "cgs-event-id";

/** Event type and id for filtering and debugging, plus the W3C trace carrier (traceparent, tracestate). */
export function eventMessageAttributes(
  event: EventEnvelope,
  carrier: TraceCarrier,
): Record<string, MessageAttributeValue> {
  const attributes: Record<string, MessageAttributeValue> = {
    [EVENT_TYPE_ATTRIBUTE]: { DataType: "String", StringValue: event.type },
    [EVENT_ID_ATTRIBUTE]: { DataType: "String", StringValue: event.id },
  };
  for (const [key, value] of Object.entries(carrier)) {
    if (value) attributes[key] = { DataType: "String", StringValue: value };
  }
  return attributes;
}

export function traceCarrierFromAttributes(
  attributes: Record<string, MessageAttributeValue> | undefined,
): TraceCarrier {
  const carrier: TraceCarrier = {};
  for (const [key, value] of Object.entries(attributes ?? {})) {
    if (value.StringValue !== undefined) carrier[key.toLowerCase()] = value.StringValue;
  }
  return carrier;
}
