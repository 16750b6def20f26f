import { randomBytes } from "node:crypto";
import {
  CloudCapacityError,
  CloudVolumeNotFoundError,
  type CloudInstance,
  type CloudProvider,
  type CreateVolumeRequest,
  type DescribeResult,
  type InstanceState,
  type LaunchRequest,
  type PoolInstance,
  type PoolLaunchRequest,
} from "./cloud-provider";
import type { StreamingCredentials } from "../domain/streaming-credentials";
import { accountNetworkTag } from "@cgs/shared";
import type { SimulatedHosts } from "./simulated-hosts";
import type { HostClient } from "./streaming-host";

/** How long things take in the simulated cloud, as on EC2 (each instance gets its own jitter around them). */
export interface SimulatorTimings {
  /** A cold launch until the instance is running. */
  bootDelayMs: number;
  /** A stopped instance started again until it is running. */
  startDelayMs: number;
  /** A running instance stopped until it is stopped. */
  stopDelayMs: number;
  /** A volume attached until the instance sees it. */
  attachDelayMs: number;
  /** A terminated instance's volume stays in use this long (another instance cannot attach it yet). */
  detachDelayMs: number;
  /** Each instance's times are scaled by a factor drawn from 1 ± jitter. */
  jitter: number;
}

export interface SimulatorSettings extends Partial<SimulatorTimings> {
  region: string;
  /** Most instances (running, pending or stopped) the region holds at once; unset: as many as asked for. */
  capacity?: number;
  /** Which of the simulated regions this is (0, 1, ...): its instances' addresses do not collide with another's. */
  addressBlock?: number;
  /** A cold launch until the instance is running. */
  bootDelayMs: number;
  /** Instances per describe page. */
  pageSize: number;
  now?: () => number;
  /** Draws the jitter (Math.random unless a benchmark seeds it). */
  random?: () => number;
  /** Runs each instance's host agent from the end of its boot until it is stopped, terminated or lost. */
  hosts?: SimulatedHosts;
  /**
   * Boot the hosts' agents on timers (npm start, tests). Off, a caller that drives a simulated clock boots the due
   * ones with `bootDueHosts()`.
   */
  realTime?: boolean;
}

interface SimInstance {
  instanceId: string;
  sessionId: string | null;
  accountId: string | null;
  poolId: string | null;
  launchedAt: number;
  /** The latest stop and start requests (an instance may be stopped and started many times). */
  stoppedAt?: number;
  startedAt?: number;
  jitter: number;
  terminated: boolean;
  lost: boolean;
  publicIp: string;
  privateIp: string;
  streamingCredentials?: StreamingCredentials;
  launch: LaunchRequest | PoolLaunchRequest;
}

export interface SimVolume {
  volumeId: string;
  accountId: string;
  sizeGb: number;
  availabilityZone: string;
  attachedTo: string | null;
  attachedAt?: number;
  /** Until then the volume is still detaching from a terminated instance. */
  detachingUntil?: number;
  /** Sunshine's paired clients, which the image keeps on the account volume (so pairing outlives the instance). */
  hostClients: HostClient[];
}

export interface CloudCallCounts {
  launch: number;
  describe: number;
  terminate: number;
  createVolume: number;
  attachVolume: number;
  deleteVolume: number;
  stop: number;
  start: number;
}

const hex = (bytes: number) => randomBytes(bytes).toString("hex");

/**
 * An in-process cloud for `npm start`, fault tests and benchmarks: instances boot after a delay, and it can
 * be told to answer capacity errors or to lose an instance. Counts every call like a bill would.
 */
export class SimulatedCloudProvider implements CloudProvider {
  readonly region: string;
  readonly calls: CloudCallCounts = {
    launch: 0,
    describe: 0,
    terminate: 0,
    createVolume: 0,
    attachVolume: 0,
    deleteVolume: 0,
    stop: 0,
    start: 0,
  };
  private readonly instances = new Map<string, SimInstance>();
  private readonly boots = new Map<string, NodeJS.Timeout>();
  /** Agents to boot at a time, when the caller drives the clock (realTime off). */
  private readonly dueBoots = new Map<string, number>();
  private readonly byPool = new Map<string, SimInstance>();
  private readonly bySession = new Map<string, SimInstance>();
  readonly volumes = new Map<string, SimVolume>();
  private capacityFailures = 0;
  private capacityExhausted = false;
  private ipCounter = 0;
  private readonly now: () => number;

  private readonly random: () => number;

  private get block(): number {
    return this.settings.addressBlock ?? 0;
  }

  /** Whether an instance of this region has (or had) this private address. */
  owns(privateIp: string): boolean {
    return privateIp.startsWith(`100.${64 + this.block}.`);
  }

  /** The region is full: told so, or holding as many instances as its capacity. */
  private full(): boolean {
    if (this.capacityExhausted) return true;
    const { capacity } = this.settings;
    return capacity !== undefined && this.instanceCount() >= capacity;
  }

  private capacityError(): CloudCapacityError {
    return new CloudCapacityError(
      `The region ${this.region} is out of capacity`,
      "InsufficientInstanceCapacity",
    );
  }

  constructor(private readonly settings: SimulatorSettings) {
    this.region = settings.region;
    this.now = settings.now ?? Date.now;
    this.random = settings.random ?? Math.random;
  }

  private timing(instance: SimInstance, ms: number | undefined): number {
    return (ms ?? 0) * instance.jitter;
  }

  /** Where the instance is now, from its launch, its latest stop and start, and the simulator's timings. */
  private stateOf(i: SimInstance): InstanceState {
    if (i.terminated) return "terminated";
    const now = this.now();
    if (i.stoppedAt !== undefined && (i.startedAt === undefined || i.startedAt < i.stoppedAt)) {
      return now - i.stoppedAt < this.timing(i, this.settings.stopDelayMs) ? "stopping" : "stopped";
    }
    if (i.startedAt !== undefined) {
      return now - i.startedAt < this.timing(i, this.settings.startDelayMs) ? "pending" : "running";
    }
    return now - i.launchedAt < this.timing(i, this.settings.bootDelayMs) ? "pending" : "running";
  }

  // ---------- fault injection ----------

  /** The next `count` launches fail with InsufficientInstanceCapacity. */
  failNextLaunches(count: number): void {
    this.capacityFailures = count;
  }

  /** The region holds at most this many instances from now on (undefined: as many as asked for). */
  setCapacity(capacity: number | undefined): void {
    this.settings.capacity = capacity;
  }

  /** Every launch fails with a capacity error until set back to false. */
  setCapacityExhausted(exhausted: boolean): void {
    this.capacityExhausted = exhausted;
  }

  /** The instance disappears as a host failure would make it (describe no longer lists it). */
  loseInstance(instanceId: string): boolean {
    const instance = this.instances.get(instanceId);
    if (!instance) return false;
    instance.lost = true;
    this.shutdownHost(instanceId);
    return true;
  }

  /** The instance's host: its pretend display and streaming clients (local runs only). */
  get hosts(): SimulatedHosts | undefined {
    return this.settings.hosts;
  }

  private shutdownHost(instanceId: string): void {
    clearTimeout(this.boots.get(instanceId));
    this.boots.delete(instanceId);
    this.dueBoots.delete(instanceId);
    void this.settings.hosts?.shutdown(instanceId);
  }

  /** The instance's agent comes up when it is running again: on a timer, or when the caller's clock gets there. */
  private scheduleHostBoot(instance: SimInstance, afterMs: number): void {
    const hosts = this.settings.hosts;
    if (!hosts || !instance.launch.hostAgent) return;
    this.shutdownHost(instance.instanceId);
    if (this.settings.realTime === false) {
      this.dueBoots.set(instance.instanceId, this.now() + afterMs);
      return;
    }
    const boot = setTimeout(() => {
      this.boots.delete(instance.instanceId);
      hosts.boot(instance.instanceId, instance.privateIp, instance.launch);
    }, afterMs);
    boot.unref();
    this.boots.set(instance.instanceId, boot);
  }

  /** Boots the agents whose instance is up by now (a caller driving a simulated clock). */
  bootDueHosts(): void {
    const hosts = this.settings.hosts;
    if (!hosts) return;
    for (const [instanceId, at] of this.dueBoots) {
      if (at > this.now()) continue;
      this.dueBoots.delete(instanceId);
      const instance = this.instances.get(instanceId);
      if (instance) hosts.boot(instanceId, instance.privateIp, instance.launch);
    }
  }

  /** Stops every simulated host's agent (the service is shutting down). */
  async close(): Promise<void> {
    for (const timer of this.boots.values()) clearTimeout(timer);
    this.boots.clear();
    this.dueBoots.clear();
    await this.settings.hosts?.closeAll();
  }

  setBootDelay(ms: number): void {
    this.settings.bootDelayMs = ms;
  }

  instance(instanceId: string): (CloudInstance & { lost: boolean }) | undefined {
    const i = this.instances.get(instanceId);
    return i ? { ...this.toCloudInstance(i), lost: i.lost } : undefined;
  }

  instanceCount(): number {
    return [...this.instances.values()].filter((i) => !i.terminated && !i.lost).length;
  }

  /** Every instance not lost, terminated ones included, with its owner and state (the soak audits them). */
  listInstances(): {
    instanceId: string;
    sessionId: string | null;
    poolId: string | null;
    state: InstanceState;
  }[] {
    return [...this.instances.values()]
      .filter((i) => !i.lost)
      .map((i) => ({
        instanceId: i.instanceId,
        sessionId: i.sessionId,
        poolId: i.poolId,
        state: this.stateOf(i),
      }));
  }

  /** Instances by state (lost ones left out): what a bill for instance hours would count. */
  instanceStates(): Map<InstanceState, number> {
    const counts = new Map<InstanceState, number>();
    for (const i of this.instances.values()) {
      if (i.lost) continue;
      const state = this.stateOf(i);
      counts.set(state, (counts.get(state) ?? 0) + 1);
    }
    return counts;
  }

  private newInstance(
    launch: LaunchRequest | PoolLaunchRequest,
    owner: Pick<SimInstance, "sessionId" | "accountId" | "poolId">,
  ): SimInstance {
    this.ipCounter += 1;
    const n = this.ipCounter;
    const jitter = this.settings.jitter ?? 0;
    const instance: SimInstance = {
      instanceId: `i-${hex(8)}${hex(1).slice(0, 1)}`,
      ...owner,
      launchedAt: this.now(),
      jitter: 1 + (this.random() * 2 - 1) * jitter,
      terminated: false,
      lost: false,
      publicIp: `198.18.${(this.block << 5) | ((n >> 8) & 31)}.${n & 255}`,
      privateIp: `100.${64 + this.block}.${(n >> 8) & 255}.${n & 255}`,
      launch,
    };
    this.instances.set(instance.instanceId, instance);
    return instance;
  }

  // ---------- CloudProvider ----------

  launchInstance(request: LaunchRequest): Promise<{ instanceId: string }> {
    this.calls.launch += 1;
    const existing = this.bySession.get(request.sessionId);
    if (existing) return Promise.resolve({ instanceId: existing.instanceId });
    if (this.full() || this.capacityFailures > 0) {
      if (this.capacityFailures > 0) this.capacityFailures -= 1;
      return Promise.reject(this.capacityError());
    }
    const instance = this.newInstance(request, {
      sessionId: request.sessionId,
      accountId: request.accountId,
      poolId: null,
    });
    if (request.streamingCredentials) instance.streamingCredentials = { ...request.streamingCredentials };
    this.bySession.set(request.sessionId, instance);
    this.scheduleHostBoot(instance, this.timing(instance, this.settings.bootDelayMs));
    return Promise.resolve({ instanceId: instance.instanceId });
  }

  /** The private-network tags the live instance at this IP joined with: its account's tag. */
  hostTags(privateIp: string): string[] {
    for (const i of this.instances.values()) {
      if (i.privateIp === privateIp && !i.terminated && i.accountId) return [accountNetworkTag(i.accountId)];
    }
    return [];
  }

  /** Whether the instance at this address sees its account volume (attached, and the attach has completed). */
  volumeReady(privateIp: string): boolean {
    for (const v of this.volumes.values()) {
      if (!v.attachedTo || this.instances.get(v.attachedTo)?.privateIp !== privateIp) continue;
      return this.now() - (v.attachedAt ?? 0) >= (this.settings.attachDelayMs ?? 0);
    }
    return false;
  }

  /** Sunshine's client list on the host at this address: the one on its attached account volume. */
  hostClientsAt(privateIp: string): HostClient[] | undefined {
    for (const i of this.instances.values()) {
      if (i.privateIp !== privateIp || i.terminated) continue;
      for (const v of this.volumes.values()) if (v.attachedTo === i.instanceId) return v.hostClients;
    }
    return undefined;
  }

  /** The streaming-host credentials installed at launch on the live instance with this private IP. */
  installedCredentials(privateIp: string): StreamingCredentials | undefined {
    for (const i of this.instances.values()) {
      if (i.privateIp === privateIp && !i.terminated) return i.streamingCredentials;
    }
    return undefined;
  }

  describeInstances(sessionIds: readonly string[]): Promise<DescribeResult> {
    const found: CloudInstance[] = [];
    let calls = 0;
    // Costed like EC2: at most 200 values per tag filter, then one call per page of matches (at least one).
    for (let start = 0; start < sessionIds.length; start += 200) {
      let matches = 0;
      for (const id of sessionIds.slice(start, start + 200)) {
        const instance = this.bySession.get(id);
        if (instance && !instance.lost) {
          found.push(this.toCloudInstance(instance));
          matches += 1;
        }
      }
      calls += Math.max(1, Math.ceil(matches / this.settings.pageSize));
    }
    this.calls.describe += calls;
    return Promise.resolve({ instances: found, calls });
  }

  listManagedInstances(): Promise<DescribeResult> {
    const found = [...this.instances.values()]
      .filter((i) => !i.terminated && !i.lost && i.sessionId !== null)
      .map((i) => this.toCloudInstance(i));
    const calls = Math.max(1, Math.ceil(found.length / this.settings.pageSize));
    this.calls.describe += calls;
    return Promise.resolve({ instances: found, calls });
  }

  terminateInstance(instanceId: string): Promise<void> {
    this.calls.terminate += 1;
    const instance = this.instances.get(instanceId);
    if (instance) {
      instance.terminated = true;
      this.shutdownHost(instanceId);
      for (const volume of this.volumes.values()) {
        if (volume.attachedTo !== instanceId) continue;
        volume.attachedTo = null;
        volume.detachingUntil = this.now() + (this.settings.detachDelayMs ?? 0);
      }
    }
    return Promise.resolve();
  }

  createVolume(request: CreateVolumeRequest): Promise<{ volumeId: string }> {
    this.calls.createVolume += 1;
    const volumeId = `vol-${hex(8)}${hex(1).slice(0, 1)}`;
    this.volumes.set(volumeId, { volumeId, ...request, attachedTo: null, hostClients: [] });
    return Promise.resolve({ volumeId });
  }

  attachVolume(volumeId: string, instanceId: string): Promise<void> {
    this.calls.attachVolume += 1;
    const volume = this.volumes.get(volumeId);
    if (!volume) return Promise.reject(new CloudVolumeNotFoundError(volumeId));
    if (!this.instances.has(instanceId))
      return Promise.reject(new Error(`instance ${instanceId} does not exist`));
    if (volume.attachedTo === instanceId) return Promise.resolve();
    if (volume.attachedTo || (volume.detachingUntil ?? 0) > this.now()) {
      return Promise.reject(new Error(`VolumeInUse: ${volumeId} is still attached elsewhere`));
    }
    volume.attachedTo = instanceId;
    volume.attachedAt = this.now();
    return Promise.resolve();
  }

  deleteVolume(volumeId: string): Promise<void> {
    this.calls.deleteVolume += 1;
    const volume = this.volumes.get(volumeId);
    if (volume?.attachedTo) return Promise.reject(new Error(`volume ${volumeId} is in use`));
    this.volumes.delete(volumeId);
    return Promise.resolve();
  }

  private toCloudInstance(i: SimInstance): CloudInstance {
    const state = this.stateOf(i);
    return {
      instanceId: i.instanceId,
      sessionId: i.sessionId ?? "",
      accountId: i.accountId ?? "",
      state,
      publicIp: state === "running" ? i.publicIp : null,
      privateIp: state === "running" ? i.privateIp : null,
    };
  }

  // ---------- capacity pools ----------

  launchPoolInstance(request: PoolLaunchRequest): Promise<{ instanceId: string }> {
    this.calls.launch += 1;
    const existing = this.byPool.get(request.poolId);
    if (existing) return Promise.resolve({ instanceId: existing.instanceId });
    if (this.full()) return Promise.reject(this.capacityError());
    const instance = this.newInstance(request, { sessionId: null, accountId: null, poolId: request.poolId });
    this.byPool.set(request.poolId, instance);
    this.scheduleHostBoot(instance, this.timing(instance, this.settings.bootDelayMs));
    return Promise.resolve({ instanceId: instance.instanceId });
  }

  describePoolInstances(): Promise<{ instances: PoolInstance[]; calls: number }> {
    const instances = [...this.byPool.values()]
      .filter((i) => !i.terminated && !i.lost)
      .map((i) => {
        const state = this.stateOf(i);
        return {
          instanceId: i.instanceId,
          poolId: i.poolId!,
          sessionId: i.sessionId,
          state,
          publicIp: state === "running" ? i.publicIp : null,
          // EC2 keeps a stopped instance's private address; its public one goes.
          privateIp: state === "terminated" ? null : i.privateIp,
        };
      });
    const calls = Math.max(1, Math.ceil(instances.length / this.settings.pageSize));
    this.calls.describe += calls;
    return Promise.resolve({ instances, calls });
  }

  private live(instanceId: string): SimInstance {
    const instance = this.instances.get(instanceId);
    if (!instance || instance.terminated || instance.lost) {
      throw new Error(`instance ${instanceId} does not exist`);
    }
    return instance;
  }

  stopInstance(instanceId: string): Promise<void> {
    this.calls.stop += 1;
    try {
      const instance = this.live(instanceId);
      if (this.stateOf(instance) !== "running") throw new Error(`instance ${instanceId} is not running`);
      instance.stoppedAt = this.now();
      this.shutdownHost(instanceId);
      return Promise.resolve();
    } catch (err) {
      return Promise.reject(err as Error);
    }
  }

  startInstance(instanceId: string): Promise<void> {
    this.calls.start += 1;
    try {
      const instance = this.live(instanceId);
      if (this.stateOf(instance) !== "stopped") throw new Error(`instance ${instanceId} is not stopped`);
      instance.startedAt = this.now();
      this.scheduleHostBoot(instance, this.timing(instance, this.settings.startDelayMs));
      return Promise.resolve();
    } catch (err) {
      return Promise.reject(err as Error);
    }
  }

  claimInstance(instanceId: string, owner: { sessionId: string; accountId: string }): Promise<void> {
    try {
      const instance = this.live(instanceId);
      instance.sessionId = owner.sessionId;
      instance.accountId = owner.accountId;
      this.bySession.set(owner.sessionId, instance);
      return Promise.resolve();
    } catch (err) {
      return Promise.reject(err as Error);
    }
  }

  /** The session's credentials reach a claimed pool instance with its assignment (what Sunshine then accepts). */
  installCredentials(instanceId: string, credentials: StreamingCredentials): void {
    const instance = this.instances.get(instanceId);
    if (instance) instance.streamingCredentials = { ...credentials };
  }

  privateIpOf(instanceId: string): string | undefined {
    return this.instances.get(instanceId)?.privateIp;
  }
}
