export { outboxTable, processedEventsTable } from "@cgs/shared";
export { resetRequestsTable, usedResetTokensTable } from "./reset-tables";
