import { createServiceApp, type ServiceContext } from "@cgs/shared";
import type { SessionsConfig } from "./config";
import type * as schema from "./data/schema";

export type SessionsContext = ServiceContext<SessionsConfig, typeof schema>;

/** The sessions service's HTTP surface; its /api/v1 routes arrive with the service's own issue. */
export function createApp({ logger, verifier, database }: SessionsContext) {
  return createServiceApp({ logger, verifier, database });
}
