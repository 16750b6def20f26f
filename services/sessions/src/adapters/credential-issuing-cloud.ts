import { accountNetworkTag } from "@cgs/shared";
import type { CloudProvider, LaunchRequest } from "./cloud-provider";
import type { PrivateNetwork } from "./private-network";
import type { StreamingCredentialVault } from "../domain/streaming-credentials";

export interface HostNetworkAccess {
  network: PrivateNetwork;
  /** Tag every streaming host joins with, beside its account's tag. */
  hostTag: string;
  /** How long the host's join key stays usable (it must outlast the boot). */
  keyTtlSeconds: number;
  /** Where host agents report (the queue URL, resolved once) and its region. */
  reports: { queueUrl(): Promise<string>; region: string };
}

/**
 * Every launch gets the instance's own streaming-host credentials, generated and stored (sealed) by the
 * vault before the instance exists, so the sessions service is their only holder besides the host itself; and a
 * single-use, non-ephemeral private-network key tagged with its account's tag, whose rule is in the tailnet policy
 * first, so the host is reachable from that account's devices only; and its host agent's signing key (derived per
 * session) with the queue it reports to.
 */
export function withStreamingCredentials(
  cloud: CloudProvider,
  vault: StreamingCredentialVault,
  hosts: HostNetworkAccess,
): CloudProvider {
  return Object.assign(Object.create(cloud) as CloudProvider, {
    async launchInstance(request: LaunchRequest) {
      const streamingCredentials = await vault.issue(request.sessionId);
      const accountTag = accountNetworkTag(request.accountId);
      await hosts.network.ensureAccountAccess(accountTag);
      const hostKey = await hosts.network.createAuthKey({
        tags: [hosts.hostTag, accountTag],
        expirySeconds: hosts.keyTtlSeconds,
        description: `cgs-host-${request.sessionId.slice(0, 8)}`,
        // The host stays in the tailnet across reboots of its agent; it leaves when the instance is terminated.
        ephemeral: false,
      });
      const hostAgent = {
        key: vault.agentKey(request.sessionId).toString("base64url"),
        reportQueueUrl: await hosts.reports.queueUrl(),
        region: hosts.reports.region,
      };
      return cloud.launchInstance({
        ...request,
        streamingCredentials,
        privateNetworkKey: hostKey.key,
        hostAgent,
      });
    },
  });
}
