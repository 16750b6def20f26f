import type { Clock } from "@cgs/shared";
import type { CloudProvider, LaunchRequest } from "./cloud-provider";
import type { PrivateNetwork } from "./private-network";
import type { SessionsDb } from "../data/session-repository";
import { mintAccountKey } from "../domain/private-network-keys";
import type { StreamingCredentialVault } from "../domain/streaming-credentials";

export interface HostNetworkAccess {
  network: PrivateNetwork;
  /** Where the host's key is recorded (an account purge revokes it from there). */
  db: SessionsDb;
  clock: Clock;
  /** How long the host's join key stays usable (it must outlast the boot). */
  keyTtlSeconds: number;
  /** Where host agents report (the queue URL, resolved once) and its region. */
  reports: { queueUrl(): Promise<string>; region: string };
}

/**
 * Every launch gets the instance's own streaming-host credentials, generated and stored (sealed) by the
 * vault before the instance exists, so the sessions service is their only holder besides the host itself; and a
 * single-use, non-ephemeral private-network key of its account, so the host is reachable from that account's
 * devices only; and its host agent's signing key (derived per session) with the queue it reports to.
 */
export function withStreamingCredentials(
  cloud: CloudProvider,
  vault: StreamingCredentialVault,
  hosts: HostNetworkAccess,
): CloudProvider {
  return Object.assign(Object.create(cloud) as CloudProvider, {
    async launchInstance(request: LaunchRequest) {
      const streamingCredentials = await vault.issue(request.sessionId);
      // The previous session's host (an account plays one session at a time) leaves before this one joins.
      await hosts.network.removeHosts(request.accountId);
      const hostKey = await mintAccountKey(
        { privateNetwork: hosts.network, db: hosts.db, clock: hosts.clock },
        {
          accountId: request.accountId,
          // The host stays in the network across restarts of its tailscaled; a player's device is ephemeral.
          kind: "host",
          expirySeconds: hosts.keyTtlSeconds,
          description: `cgs-host-${request.sessionId.slice(0, 8)}`,
        },
      );
      const hostAgent = {
        key: vault.agentKey(request.sessionId).toString("base64url"),
        reportQueueUrl: await hosts.reports.queueUrl(),
        region: hosts.reports.region,
      };
      return cloud.launchInstance({
        ...request,
        streamingCredentials,
        privateNetworkKey: hostKey.key,
        ...(hosts.network.loginServer ? { privateNetworkLoginServer: hosts.network.loginServer } : {}),
        hostAgent,
      });
    },
  });
}
