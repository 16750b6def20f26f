import { createServiceApp, type ServiceContext } from "@cgs/shared";
import type { BillingConfig } from "./config";
import type * as schema from "./data/schema";

export type BillingContext = ServiceContext<BillingConfig, typeof schema>;

/** The billing service's HTTP surface; its /api/v1 routes arrive with the service's own issue. */
export function createApp({ logger, verifier, database }: BillingContext) {
  return createServiceApp({ logger, verifier, database });
}
