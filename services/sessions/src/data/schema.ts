export { outboxTable, processedEventsTable } from "@cgs/shared";
export {
  idempotencyKeysTable,
  pairingPinsTable,
  regionCapacityTable,
  sessionsTable,
  volumesTable,
} from "./session-tables";
export { streamingCredentialsTable } from "./streaming-credential-tables";
export { devicesTable } from "./device-tables";
export { privateNetworkKeysTable, privateNetworkSlotsTable } from "./private-network-tables";
export { poolInstancesTable, poolKeeperLeasesTable } from "./pool-tables";
