import type { Clock } from "@cgs/shared";
import type { CloudProvider, HostAgentLaunch, LaunchRequest, PoolLaunchRequest } from "./cloud-provider";
import type { Assignment } from "./host-assigner";
import type { PrivateNetwork } from "./private-network";
import type { SessionsDb } from "../data/session-repository";
import { mintAccountKey } from "../domain/private-network-keys";
import type { StreamingCredentialVault, StreamingCredentials } from "../domain/streaming-credentials";

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

/** What a session's host is given, at its launch (cold) or with its assignment (a claimed pool instance). */
export interface SessionHostSecrets {
  streamingCredentials: StreamingCredentials;
  privateNetworkKey: string;
  privateNetworkLoginServer?: string;
  hostAgent: HostAgentLaunch;
}

/**
 * The secrets of a session's host: its own streaming-host credentials, generated and stored (sealed) by the vault
 * before the host has them, so the sessions service is their only holder besides the host itself; a single-use,
 * non-ephemeral private-network key of its account, so the host is reachable from that account's devices only;
 * and its host agent's signing key (derived per session) with the queue it reports to. A pool instance, before any
 * session, holds only its slot's key: nothing of any account.
 */
export class HostSecrets {
  constructor(
    private readonly vault: StreamingCredentialVault,
    private readonly hosts: HostNetworkAccess,
  ) {}

  async forSession(owner: { sessionId: string; accountId: string }): Promise<SessionHostSecrets> {
    const { hosts, vault } = this;
    const streamingCredentials = await vault.issue(owner.sessionId);
    // The previous session's host (an account plays one session at a time) leaves before this one joins.
    await hosts.network.removeHosts(owner.accountId);
    const hostKey = await mintAccountKey(
      { privateNetwork: hosts.network, db: hosts.db, clock: hosts.clock },
      {
        accountId: owner.accountId,
        // The host stays in the network across restarts of its tailscaled; a player's device is ephemeral.
        kind: "host",
        expirySeconds: hosts.keyTtlSeconds,
        description: `cgs-host-${owner.sessionId.slice(0, 8)}`,
      },
    );
    return {
      streamingCredentials,
      privateNetworkKey: hostKey.key,
      ...(hosts.network.loginServer ? { privateNetworkLoginServer: hosts.network.loginServer } : {}),
      hostAgent: await this.agent(vault.agentKey(owner.sessionId)),
    };
  }

  /** A pool slot's standby agent: the slot's key and the report queue. */
  forPoolSlot(poolId: string): Promise<HostAgentLaunch> {
    return this.agent(this.vault.poolKey(poolId));
  }

  /** The assignment a claimed pool instance receives: what a cold launch's user data would have carried. */
  async assignmentFor(
    owner: { sessionId: string; accountId: string },
    volumeId: string | null,
  ): Promise<Assignment> {
    const secrets = await this.forSession(owner);
    return {
      sessionId: owner.sessionId,
      agentKey: secrets.hostAgent.key,
      sunshineUsername: secrets.streamingCredentials.username,
      sunshinePassword: secrets.streamingCredentials.password,
      privateNetworkKey: secrets.privateNetworkKey,
      privateNetworkLoginServer: secrets.privateNetworkLoginServer ?? null,
      volumeId,
    };
  }

  private async agent(key: Buffer): Promise<HostAgentLaunch> {
    return {
      key: key.toString("base64url"),
      reportQueueUrl: await this.hosts.reports.queueUrl(),
      region: this.hosts.reports.region,
    };
  }
}

/** Every launch carries its host's secrets: a session's (cold launch) or a pool slot's (standby). */
export function withHostSecrets(cloud: CloudProvider, secrets: HostSecrets): CloudProvider {
  return Object.assign(Object.create(cloud) as CloudProvider, {
    async launchInstance(request: LaunchRequest) {
      return cloud.launchInstance({ ...request, ...(await secrets.forSession(request)) });
    },
    async launchPoolInstance(request: PoolLaunchRequest) {
      return cloud.launchPoolInstance({ ...request, hostAgent: await secrets.forPoolSlot(request.poolId) });
    },
  });
}
