import { parseEvent, type EventEnvelope } from "../events";
import type { SqlExecutor } from "../db/database-types";
import { outboxTable } from "../db/shared-tables";
import { injectTraceCarrier } from "../tracing/trace-carrier";

/**
 * Writes the event to the outbox inside the caller's transaction, one row per destination (queue name
 * or URL), with the active trace so the relayed message continues the request's trace. Nothing is
 * sent unless the transaction commits. Enqueueing the same event id to the same destination twice is
 * a no-op.
 */
export async function enqueueEvent(
  tx: SqlExecutor,
  event: EventEnvelope,
  destinations: string | readonly string[],
): Promise<void> {
  const list = typeof destinations === "string" ? [destinations] : [...new Set(destinations)];
  if (list.length === 0) return;
  const parsed = parseEvent(event);
  if (!parsed.success) throw new Error(`refusing to enqueue ${parsed.error}`);
  const traceContext = injectTraceCarrier();
  await tx
    .insert(outboxTable)
    .values(
      list.map((destination) => ({
        eventId: event.id,
        eventType: event.type,
        destination,
        payload: parsed.event,
        traceContext,
      })),
    )
    .onConflictDoNothing();
}
