import { createServiceApp, type ServiceContext } from "@cgs/shared";
import type { AuthProxyConfig } from "./config";
import type * as schema from "./data/schema";

export type AuthProxyContext = ServiceContext<AuthProxyConfig, typeof schema>;

/** The auth-proxy service's HTTP surface; its /api/v1 routes arrive with the service's own issue. */
export function createApp({ logger, verifier, database }: AuthProxyContext) {
  return createServiceApp({ logger, verifier, database });
}
