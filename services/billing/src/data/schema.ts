export { outboxTable, processedEventsTable } from "@cgs/shared";
export {
  walletsTable,
  ledgerEntriesTable,
  holdsTable,
  meteredSessionsTable,
  topupsTable,
  stripeEventsTable,
  storagePeriodsTable,
  disputesTable,
  paymentReviewsTable,
  cardSetupsTable,
  paymentMethodsTable,
} from "./billing-tables";
