export { outboxTable, processedEventsTable } from "@cgs/shared";
export { accountsTable, purgedAccountsTable } from "./account-tables";
