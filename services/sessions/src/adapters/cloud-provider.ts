import type { StreamingCredentials } from "../domain/streaming-credentials";

export type InstanceState = "pending" | "running" | "stopping" | "stopped" | "shutting-down" | "terminated";

export interface CloudInstance {
  instanceId: string;
  sessionId: string;
  accountId: string;
  state: InstanceState;
  publicIp: string | null;
  privateIp: string | null;
}

export interface LaunchRequest {
  accountId: string;
  sessionId: string;
  availabilityZone: string;
  /** This instance's own streaming-host API credentials, installed at boot (never shared between instances). */
  streamingCredentials?: StreamingCredentials;
  /** Single-use key the host joins the private network with, reaching only its account's devices (never logged). */
  privateNetworkKey?: string;
  /** The control plane the host logs in to with that key (Headscale's URL); unset for hosted Tailscale. */
  privateNetworkLoginServer?: string;
  /** What the instance's host agent needs: the session's signing key (base64url) and where to report. */
  hostAgent?: HostAgentLaunch;
}

export interface HostAgentLaunch {
  key: string;
  reportQueueUrl: string;
  region: string;
}

/** A pool instance's launch: no session yet; its agent waits in standby under the pool slot's key. */
export interface PoolLaunchRequest {
  poolId: string;
  availabilityZone: string;
  /** The pool slot's signing key (base64url) and where the standby agent reports (added by the credential wrapper). */
  hostAgent?: HostAgentLaunch;
}

/** An instance launched for the pool (tagged with its slot), in whatever state it is. */
export interface PoolInstance {
  instanceId: string;
  poolId: string;
  /** Set once a session claimed it (its session tag); the pool no longer counts it. */
  sessionId: string | null;
  state: InstanceState;
  publicIp: string | null;
  privateIp: string | null;
}

export interface CreateVolumeRequest {
  accountId: string;
  sizeGb: number;
  availabilityZone: string;
}

export interface DescribeResult {
  instances: CloudInstance[];
  /** Cloud API calls the describe took (one per page). */
  calls: number;
}

/** The region has no capacity for the instance (InsufficientInstanceCapacity and its kin): transient. */
export class CloudCapacityError extends Error {
  constructor(
    message: string,
    readonly cloudCode: string,
  ) {
    super(message);
    this.name = "CloudCapacityError";
  }
}

/** The volume no longer exists in the cloud (deleted out of band, or lost): no retry brings it back. */
export class CloudVolumeNotFoundError extends Error {
  constructor(readonly volumeId: string) {
    super(`The volume ${volumeId} does not exist`);
    this.name = "CloudVolumeNotFoundError";
  }
}

/** Instances and volumes of one region. Every instance and volume is tagged with its account and session. */
export interface CloudProvider {
  readonly region: string;
  /** Runs one instance; idempotent per sessionId. Throws CloudCapacityError when the region is full. */
  launchInstance(request: LaunchRequest): Promise<{ instanceId: string }>;
  /** Instances tagged with any of these session ids, found by tag filter in pages (never one call per session). */
  describeInstances(sessionIds: readonly string[]): Promise<DescribeResult>;
  /** Every instance carrying the platform's tags that is not terminated, in pages (the orphan sweep). */
  listManagedInstances(): Promise<DescribeResult>;
  /** Idempotent: terminating an instance that is already gone succeeds. */
  terminateInstance(instanceId: string): Promise<void>;
  createVolume(request: CreateVolumeRequest): Promise<{ volumeId: string }>;
  /** Throws CloudVolumeNotFoundError when the volume no longer exists. */
  attachVolume(volumeId: string, instanceId: string): Promise<void>;
  /** Idempotent: deleting a volume that is already gone succeeds. */
  deleteVolume(volumeId: string): Promise<void>;

  // ---------- capacity pools ----------

  /** Launches an instance for a pool slot (tagged with it, no session); idempotent per poolId. */
  launchPoolInstance(request: PoolLaunchRequest): Promise<{ instanceId: string }>;
  /** Every not-terminated instance tagged with a pool slot (claimed ones carry a session tag as well). */
  describePoolInstances(): Promise<{ instances: PoolInstance[]; calls: number }>;
  /** Stops a running instance (a warm pool instance keeps its booted root volume). */
  stopInstance(instanceId: string): Promise<void>;
  /** Starts a stopped instance. */
  startInstance(instanceId: string): Promise<void>;
  /** Makes a pool instance the session's: its account and session tags (describe by session then finds it). */
  claimInstance(instanceId: string, owner: { sessionId: string; accountId: string }): Promise<void>;
}
