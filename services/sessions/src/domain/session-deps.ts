import type { Logger } from "pino";
import type { AccountsClient, AnyEvent, Clock } from "@cgs/shared";
import type { BillingClient } from "../adapters/billing-client";
import type { CloudProvider } from "../adapters/cloud-provider";
import type { HostSecrets } from "../adapters/credential-issuing-cloud";
import type { HostAssigner } from "../adapters/host-assigner";
import type { PrivateNetwork } from "../adapters/private-network";
import type { StreamingHost } from "../adapters/streaming-host";
import type { SessionsDb, SessionsTx } from "../data/session-repository";
import type { RegionDirectory } from "./regions";
import type { StartEstimates } from "./start-estimates";

/** The outside systems the sessions service talks to, chosen at the composition root. */
export interface SessionsAdapters {
  /** Every region's fleet; `cloud` is the one of the region a piece of work is in (inRegion), the first by default. */
  regions: RegionDirectory;
  cloud: CloudProvider;
  streamingHost: StreamingHost;
  privateNetwork: PrivateNetwork;
  accounts: AccountsClient;
  billing: BillingClient;
  /** A session host's secrets, for a claimed pool instance's assignment (cold launches get them in user data). */
  hostSecrets: HostSecrets;
  /** Hands a claimed pool instance its session. */
  assigner: HostAssigner;
}

/** Writes an event to the outbox inside the caller's transaction; where it goes is decided at composition. */
export interface EventPublisher {
  publish(tx: SessionsTx, event: AnyEvent): Promise<void>;
}

/** The reconciler's pace; each replica leases its own sessions. */
export interface ReconcilerSettings {
  /** Identifies this replica's leases. */
  owner?: string;
  batchSize: number;
  leaseMs: number;
  startTimeoutMs: number;
  /** A launched instance missing from describe within this long is not yet "lost" (eventual consistency). */
  describeGraceMs: number;
  /** Sessions handled at once within a tick (their per-transition calls: attach, probe, terminate). */
  concurrency?: number;
}

/** When a running session is warned and stopped for lack of play, length or a silent host (DESIGN §5). */
export interface PlaySettings {
  /** Length of a session-clock minute: 60 000 ms except in tests. */
  minuteMs: number;
  idleWarningMinutes: number;
  maxLengthWarningMinutes: number;
  /** Keep playing in a maximum-length warning adds this many minutes. */
  extensionMinutes: number;
  /** A ready host silent this long is warned about, and this long ends as instance_lost. */
  hostStaleMs: number;
  hostLostMs: number;
}

/** Capacity pools: pre-booted instances a start claims (hot: running, warm: stopped), sized from demand. */
export interface PoolSettings {
  hot: { min: number; max: number; coverMinutes: number };
  warm: { min: number; max: number; coverMinutes: number };
  shrinkAfterMs: number;
  launchTimeoutMs: number;
  /** Most cloud calls that change the pool (launch, start, stop, terminate) in one tick. */
  changesPerTick: number;
  /** Idle capacity's cost per instance hour, minor units. */
  runningHourCost: number;
  stoppedHourCost: number;
}

/** Where a start's instance comes from: a hot or warm pool instance, or a new one. */
export type Capacity = "hot" | "warm" | "cold";

/** What the use cases need to know, read from config once at composition. */
export interface SessionSettings {
  /** Minor units of `currency` per running minute. */
  ratePerMinute: number;
  currency: string;
  /** When the account's preferences carry none. */
  defaultIdleTimeoutMinutes: number;
  defaultMaxLengthMinutes: number;
  /** Where new account volumes are created (instances follow their volume). */
  availabilityZone: string;
  capacityRetryAfterSeconds: number;
  /** A start with region auto and no bound of its own accepts regions measured at most this round trip. */
  autoMaxRttMs: number;
  /** The line of sessions waiting for a machine when every allowed region was full. */
  queue: { maxWaitMs: number; typicalIntervalMs: number };
  play: PlaySettings;
  idempotencyTtlHours: number;
  pairing: { attempts: number; retryDelayMs: number; pinTtlSeconds: number; pinHashSecret: string };
  streamingPort: number;
  privateNetwork: { keyTtlSeconds: number; maxLiveKeys: number };
  reconciler: ReconcilerSettings;
  pool: PoolSettings;
  /** Typical start-to-ready by capacity until enough starts were measured, in ms. */
  startEstimates: Record<Capacity, number>;
}

/**
 * Asks this process's background workers for a pass now rather than at their next interval: a start that claimed a
 * pool machine is assigned at once. Created with the use cases' dependencies; the workers, once running, say what a
 * wake-up does (until then, and in a process without workers, it does nothing). The pool keeper is left to its
 * interval: woken by a claim, it would wake the warm machine a concurrent start is about to claim.
 */
export class Wakeups {
  private kickReconciler: () => void = () => undefined;

  reconciler(): void {
    this.kickReconciler();
  }

  /** The running reconciler's kick (startSessionsWorkers); returns how to stop forwarding to it. */
  onReconciler(kick: () => void): () => void {
    this.kickReconciler = kick;
    return () => {
      this.kickReconciler = () => undefined;
    };
  }
}

export interface SessionsDomainDeps extends SessionsAdapters {
  db: SessionsDb;
  wake: Wakeups;
  /** Typical start-to-ready by capacity (poll's estimates), refreshed by the reconciler. */
  estimates: StartEstimates;
  settings: SessionSettings;
  events: EventPublisher;
  clock: Clock;
  logger: Logger;
}
