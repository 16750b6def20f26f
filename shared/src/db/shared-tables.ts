import { sql } from "drizzle-orm";
import {
  bigserial,
  index,
  integer,
  jsonb,
  pgTable,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from "drizzle-orm/pg-core";
import type { EventEnvelope } from "../events";

/**
 * Transactional outbox: a row per (event, destination), written in the same transaction as the state
 * change and relayed to SQS by the outbox relay. `availableAt` doubles as the relay's claim lease.
 */
export const outboxTable = pgTable(
  "outbox",
  {
    id: bigserial("id", { mode: "number" }).primaryKey(),
    eventId: uuid("event_id").notNull(),
    eventType: text("event_type").notNull(),
    destination: text("destination").notNull(),
    payload: jsonb("payload").$type<EventEnvelope>().notNull(),
    traceContext: jsonb("trace_context").$type<Record<string, string>>().notNull().default({}),
    attempts: integer("attempts").notNull().default(0),
    lastError: text("last_error"),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
    availableAt: timestamp("available_at", { withTimezone: true }).notNull().defaultNow(),
    sentAt: timestamp("sent_at", { withTimezone: true }),
  },
  (table) => [
    uniqueIndex("outbox_event_destination_key").on(table.eventId, table.destination),
    index("outbox_pending_idx")
      .on(table.availableAt, table.id)
      .where(sql`${table.sentAt} is null`),
  ],
);

/** Event ids a consumer has handled; inserted in the handler's transaction so a redelivery is a no-op. */
export const processedEventsTable = pgTable("processed_events", {
  eventId: uuid("event_id").primaryKey(),
  eventType: text("event_type").notNull(),
  processedAt: timestamp("processed_at", { withTimezone: true }).notNull().defaultNow(),
});

/** Spread into a service's drizzle schema so drizzle-kit emits these tables in its migrations. */
export const sharedTables = { outboxTable, processedEventsTable };

export type OutboxRow = typeof outboxTable.$inferSelect;
