export { outboxTable, processedEventsTable } from "@cgs/shared";
