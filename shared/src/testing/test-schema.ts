import { integer, pgTable, text, timestamp, uuid } from "drizzle-orm/pg-core";
import { outboxTable, processedEventsTable } from "../db/shared-tables";

// drizzle-kit only sees tables exported by name from the schema file.
export { outboxTable, processedEventsTable };

/** What shared's own tests store: the state a handler changes, so tests can count its effects. */
export const handledEventsTable = pgTable("test_handled_events", {
  id: integer("id").primaryKey().generatedAlwaysAsIdentity(),
  eventId: uuid("event_id").notNull(),
  eventType: text("event_type").notNull(),
  handledAt: timestamp("handled_at", { withTimezone: true }).notNull().defaultNow(),
});

export const testSchema = { outboxTable, processedEventsTable, handledEventsTable };
