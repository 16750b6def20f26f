import { createServiceApp, type ServiceContext } from "@cgs/shared";
import type { AccountsConfig } from "./config";
import type * as schema from "./data/schema";

export type AccountsContext = ServiceContext<AccountsConfig, typeof schema>;

/** The accounts service's HTTP surface; its /api/v1 routes arrive with the service's own issue. */
export function createApp({ logger, verifier, database }: AccountsContext) {
  return createServiceApp({ logger, verifier, database });
}
