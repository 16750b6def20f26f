/** @cgs/billing's public entry: its configuration schema (the configuration reference is generated from it). */
export { billingConfigSchema, type BillingConfig } from "./config";
