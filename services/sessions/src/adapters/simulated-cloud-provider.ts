import { randomBytes } from "node:crypto";
import {
  CloudCapacityError,
  type CloudInstance,
  type CloudProvider,
  type CreateVolumeRequest,
  type DescribeResult,
  type LaunchRequest,
} from "./cloud-provider";
import type { StreamingCredentials } from "../domain/streaming-credentials";
import { accountNetworkTag } from "@cgs/shared";
import type { SimulatedHosts } from "./simulated-hosts";
import type { HostClient } from "./streaming-host";

export interface SimulatorSettings {
  region: string;
  /** Time from launch until the instance is running. */
  bootDelayMs: number;
  /** Instances per describe page. */
  pageSize: number;
  now?: () => number;
  /** Runs each instance's host agent from the end of its boot until it is terminated or lost. */
  hosts?: SimulatedHosts;
}

interface SimInstance {
  instanceId: string;
  sessionId: string;
  accountId: string;
  launchedAt: number;
  terminated: boolean;
  lost: boolean;
  publicIp: string;
  privateIp: string;
  streamingCredentials?: StreamingCredentials;
}

export interface SimVolume {
  volumeId: string;
  accountId: string;
  sizeGb: number;
  availabilityZone: string;
  attachedTo: string | null;
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
  };
  private readonly instances = new Map<string, SimInstance>();
  private readonly boots = new Map<string, NodeJS.Timeout>();
  private readonly bySession = new Map<string, SimInstance>();
  readonly volumes = new Map<string, SimVolume>();
  private capacityFailures = 0;
  private capacityExhausted = false;
  private ipCounter = 0;
  private readonly now: () => number;

  constructor(private readonly settings: SimulatorSettings) {
    this.region = settings.region;
    this.now = settings.now ?? Date.now;
  }

  // ---------- fault injection ----------

  /** The next `count` launches fail with InsufficientInstanceCapacity. */
  failNextLaunches(count: number): void {
    this.capacityFailures = count;
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
    void this.settings.hosts?.shutdown(instanceId);
  }

  /** Stops every simulated host's agent (the service is shutting down). */
  async close(): Promise<void> {
    for (const timer of this.boots.values()) clearTimeout(timer);
    this.boots.clear();
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

  // ---------- CloudProvider ----------

  launchInstance(request: LaunchRequest): Promise<{ instanceId: string }> {
    this.calls.launch += 1;
    const existing = this.bySession.get(request.sessionId);
    if (existing) return Promise.resolve({ instanceId: existing.instanceId });
    if (this.capacityExhausted || this.capacityFailures > 0) {
      if (this.capacityFailures > 0) this.capacityFailures -= 1;
      return Promise.reject(
        new CloudCapacityError(
          `The region ${this.region} is out of capacity`,
          "InsufficientInstanceCapacity",
        ),
      );
    }
    this.ipCounter += 1;
    const n = this.ipCounter;
    const instance: SimInstance = {
      instanceId: `i-${hex(8)}${hex(1).slice(0, 1)}`,
      sessionId: request.sessionId,
      accountId: request.accountId,
      launchedAt: this.now(),
      terminated: false,
      lost: false,
      publicIp: `198.18.${(n >> 8) & 255}.${n & 255}`,
      privateIp: `100.64.${(n >> 8) & 255}.${n & 255}`,
      ...(request.streamingCredentials ? { streamingCredentials: { ...request.streamingCredentials } } : {}),
    };
    this.instances.set(instance.instanceId, instance);
    this.bySession.set(request.sessionId, instance);
    const hosts = this.settings.hosts;
    if (hosts && request.hostAgent) {
      const boot = setTimeout(() => {
        this.boots.delete(instance.instanceId);
        hosts.boot(instance.instanceId, instance.privateIp, request);
      }, this.settings.bootDelayMs);
      boot.unref();
      this.boots.set(instance.instanceId, boot);
    }
    return Promise.resolve({ instanceId: instance.instanceId });
  }

  /** The private-network tags the live instance at this IP joined with: its account's tag. */
  hostTags(privateIp: string): string[] {
    for (const i of this.instances.values()) {
      if (i.privateIp === privateIp && !i.terminated) return [accountNetworkTag(i.accountId)];
    }
    return [];
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
      .filter((i) => !i.terminated && !i.lost)
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
      for (const volume of this.volumes.values())
        if (volume.attachedTo === instanceId) volume.attachedTo = null;
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
    if (!volume) return Promise.reject(new Error(`volume ${volumeId} does not exist`));
    if (!this.instances.has(instanceId))
      return Promise.reject(new Error(`instance ${instanceId} does not exist`));
    volume.attachedTo = instanceId;
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
    const running = this.now() - i.launchedAt >= this.settings.bootDelayMs;
    const state = i.terminated ? "terminated" : running ? "running" : "pending";
    return {
      instanceId: i.instanceId,
      sessionId: i.sessionId,
      accountId: i.accountId,
      state,
      publicIp: state === "running" ? i.publicIp : null,
      privateIp: state === "running" ? i.privateIp : null,
    };
  }
}
