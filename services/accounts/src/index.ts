/**
 * @cgs/accounts's public entry, for what runs the service in-process (the cross-service test harnesses) or
 * documents it: the composition root, the configuration schema and the database tables.
 */
export { buildAccounts } from "./composition";
export { accountsConfigSchema, type AccountsConfig } from "./config";
export * as accountsTables from "./data/schema";
