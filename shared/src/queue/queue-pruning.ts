import { and, inArray, isNotNull, lt } from "drizzle-orm";
import type { SqlExecutor } from "../db/database-types";
import { outboxTable, processedEventsTable } from "../db/shared-tables";

export interface QueuePruneSettings {
  /** Sent outbox rows older than this are deleted. */
  sentOutboxRetentionMs: number;
  /** Handled event ids older than this (past the redelivery horizon) are deleted. */
  processedEventRetentionMs: number;
  /** Rows deleted per statement, so a backlog never holds long locks. */
  batchSize?: number;
}

export interface QueuePruneReport {
  outbox: number;
  processedEvents: number;
}

/** Deletes what only grows in the shared queue tables: sent outbox rows and old processed-event ids. */
export async function pruneQueueTables(
  db: SqlExecutor,
  settings: QueuePruneSettings,
  now: Date = new Date(),
): Promise<QueuePruneReport> {
  const batch = settings.batchSize ?? 5_000;
  const sentBefore = new Date(now.getTime() - settings.sentOutboxRetentionMs);
  const handledBefore = new Date(now.getTime() - settings.processedEventRetentionMs);
  const report: QueuePruneReport = { outbox: 0, processedEvents: 0 };
  for (;;) {
    const ids = db
      .select({ id: outboxTable.id })
      .from(outboxTable)
      .where(and(isNotNull(outboxTable.sentAt), lt(outboxTable.sentAt, sentBefore)))
      .limit(batch);
    const deleted = await db
      .delete(outboxTable)
      .where(inArray(outboxTable.id, ids))
      .returning({ id: outboxTable.id });
    report.outbox += deleted.length;
    if (deleted.length < batch) break;
  }
  for (;;) {
    const ids = db
      .select({ id: processedEventsTable.eventId })
      .from(processedEventsTable)
      .where(lt(processedEventsTable.processedAt, handledBefore))
      .limit(batch);
    const deleted = await db
      .delete(processedEventsTable)
      .where(inArray(processedEventsTable.eventId, ids))
      .returning({ id: processedEventsTable.eventId });
    report.processedEvents += deleted.length;
    if (deleted.length < batch) break;
  }
  return report;
}
