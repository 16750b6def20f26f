/**
 * @cgs/auth-proxy's public entry, for what runs the service in-process (the cross-service test harnesses) or
 * documents it: the composition root and its adapters, the configuration schema and the database tables.
 */
export { adaptersFromConfig, composeAuthProxy, type AuthProxyAdapters } from "./composition";
export { authProxyConfigSchema, type AuthProxyConfig } from "./config";
export * as authProxyTables from "./data/schema";
