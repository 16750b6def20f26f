import type { Logger } from "pino";
import type { AccountsClient } from "../clients/accounts-client";
import type { BillingClient } from "../adapters/billing-client";
import type { CloudProvider } from "../adapters/cloud-provider";
import type { PrivateNetwork } from "../adapters/private-network";
import type { StreamingHost } from "../adapters/streaming-host";
import type { SessionsConfig } from "../config";
import type { SessionsDb } from "../data/session-repository";

/** The outside systems the sessions service talks to, chosen at the composition root. */
export interface SessionsAdapters {
  cloud: CloudProvider;
  streamingHost: StreamingHost;
  privateNetwork: PrivateNetwork;
  accounts: AccountsClient;
  billing: BillingClient;
}

export interface SessionsDomainDeps extends SessionsAdapters {
  db: SessionsDb;
  config: SessionsConfig;
  logger: Logger;
}
