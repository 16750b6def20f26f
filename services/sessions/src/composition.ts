import { randomUUID } from "node:crypto";
import type { RequestListener } from "node:http";
import type { Logger } from "pino";
import type { SQSClient } from "@aws-sdk/client-sqs";
import {
  createAccountsClient,
  createOutboxPublisher,
  createQueueUrlResolver,
  deleteMessages,
  ensureQueue,
  systemClock,
  type Clock,
  metrics,
  onScrape,
  sqsClientFromConfig,
  startEventWorkers,
  startPeriodicWorker,
  startQueuePoller,
  type Closer,
  type OpenedDatabase,
} from "@cgs/shared";
import { createBillingClient } from "./adapters/billing-client";
import type { CloudProvider } from "./adapters/cloud-provider";
import { HostSecrets, withHostSecrets } from "./adapters/credential-issuing-cloud";
import { HttpsHostAssigner, type HostAssigner } from "./adapters/host-assigner";
import { Ec2CloudProvider } from "./adapters/ec2-cloud-provider";
import { HeadscalePrivateNetwork } from "./adapters/headscale-private-network";
import { SimulatedPrivateNetwork, type PrivateNetwork } from "./adapters/private-network";
import { TailscalePrivateNetwork, type SlotLeases } from "./adapters/tailscale-private-network";
import { SimulatedBeacons } from "./adapters/simulated-beacons";
import { SimulatedCloudProvider } from "./adapters/simulated-cloud-provider";
import { SimulatedHostAssigner, SimulatedHosts } from "./adapters/simulated-hosts";
import type { ReportSink } from "@cgs/host-agent";
import { SimulatedStreamingHost, SunshineStreamingHost, type StreamingHost } from "./adapters/streaming-host";
import { createApp, type SessionsAppDeps, type SessionsContext, type SimulatorControls } from "./app";
import type { SessionsConfig } from "./config";
import type * as schema from "./data/schema";
import { findSlot, leaseSlot } from "./data/private-network-repository";
import {
  countActiveSessionsByState,
  findSession,
  hostReportAges,
  type SessionsDb,
} from "./data/session-repository";
import { currentStates } from "./data/session-tables";
import { queueLengths } from "./data/queue-repository";
import { StreamingCredentialRepository } from "./data/streaming-credential-repository";
import { sessionEventHandlers } from "./events/session-event-handlers";
import { ingestHostReports, type AgentKeyLookup } from "./domain/host-reports";
import { sweepPlay } from "./domain/play-sweep";
import { PoolKeeper } from "./domain/pool-keeper";
import { leasePoolKeeping } from "./data/pool-repository";
import { Reconciler } from "./domain/reconciler";
import { inRegion, RegionDirectory } from "./domain/regions";
import { serveQueue } from "./domain/queue";
import { StartEstimates } from "./domain/start-estimates";
import { LOCAL_STREAMING_CREDENTIALS_KEY, StreamingCredentialVault } from "./domain/streaming-credentials";
import {
  type Capacity,
  type EventPublisher,
  type SessionSettings,
  type SessionsDomainDeps,
  Wakeups,
} from "./domain/session-deps";

/**
 * The host-report queue's URL, looked up (or, with CREATE_QUEUES, created with its DLQ) once, on first use: a
 * launch hands it to the instance's agent, the report consumer drains it.
 */
export function hostReportQueue(
  config: SessionsConfig,
  sqs: SQSClient = sqsClientFromConfig(config),
): () => Promise<string> {
  const name = config.QUEUE_NAME_PREFIX + config.HOST_REPORT_QUEUE_NAME;
  let url: Promise<string> | undefined;
  return () => {
    url ??= (
      config.CREATE_QUEUES
        ? ensureQueue(sqs, name, {
            maxReceiveCount: config.QUEUE_MAX_RECEIVE_COUNT,
            visibilityTimeout: 30,
          }).then((q) => q.queueUrl)
        : createQueueUrlResolver(sqs)(name)
    ).catch((err: unknown) => {
      url = undefined;
      throw err;
    });
    return url;
  };
}

export interface BuiltAdapters extends SessionsAppDeps {
  /** Per-instance streaming-host credentials and report keys. */
  vault: StreamingCredentialVault;
  /** Each session's report-signing key (the vault derives it). */
  agentKey: AgentKeyLookup;
  reportQueueUrl(): Promise<string>;
}

/**
 * A benchmark that drives the simulators on a simulated clock (a day in minutes): their time, their jitter's random
 * source, and where the hosts' reports go; the caller boots due hosts and ticks the agents itself.
 */
export interface SimulationDrive {
  now(): number;
  random(): number;
  sink(queueUrl: string): ReportSink;
}

/** Picks every adapter from config: simulators by default, EC2 / Sunshine / Tailscale when configured. */
export function buildAdapters(
  config: SessionsConfig,
  db: SessionsDb,
  logger?: Logger,
  overrides: { privateNetwork?: PrivateNetwork; simulation?: SimulationDrive } = {},
): BuiltAdapters {
  const drive = overrides.simulation;
  const vault = new StreamingCredentialVault(
    new StreamingCredentialRepository(db),
    config.STREAMING_CREDENTIALS_KEY ?? LOCAL_STREAMING_CREDENTIALS_KEY,
  );
  const reportQueueUrl = hostReportQueue(config);
  let simulatedHost: SimulatedStreamingHost | undefined;
  const credentials = (sessionId: string) => vault.forSession(sessionId);
  const timeoutMs = config.INTERNAL_CALL_TIMEOUT_MS;
  // One fleet per configured region; the simulator's regions share one set of pretend hosts.
  const simulated = new Map<string, SimulatedCloudProvider>();
  const hosts =
    config.CLOUD_PROVIDER !== "ec2" && config.SIMULATOR_HOST_AGENTS
      ? new SimulatedHosts({
          region: config.AWS_REGION,
          endpoint: config.AWS_ENDPOINT_URL,
          reportIntervalMs: config.SIMULATOR_AGENT_REPORT_INTERVAL_MS,
          sampleIntervalMs: Math.min(1_000, config.SIMULATOR_AGENT_REPORT_INTERVAL_MS),
          sunshineAnswers: (ip) => simulatedHost?.answers(ip) ?? true,
          clientConnected: (ip) => void simulatedHost?.completePairing(ip),
          ...(logger ? { logger: logger.child({ component: "simulated-host-agent" }) } : {}),
          ...(drive ? { now: drive.now, realTime: false, sink: drive.sink } : {}),
        })
      : undefined;
  const regionCloud = (region: SessionsConfig["REGIONS"][number], index: number): CloudProvider => {
    if (config.CLOUD_PROVIDER === "ec2") {
      return new Ec2CloudProvider({
        region: region.id,
        endpoint: config.AWS_ENDPOINT_URL,
        tagPrefix: config.CLOUD_TAG_PREFIX,
        launchTemplate: region.ec2?.launchTemplate ?? config.EC2_LAUNCH_TEMPLATE,
        launchTemplateVersion: config.EC2_LAUNCH_TEMPLATE_VERSION,
        amiId: region.ec2?.amiId ?? config.EC2_AMI_ID,
        instanceType: config.EC2_INSTANCE_TYPE,
        subnetId: region.ec2?.subnetId ?? config.EC2_SUBNET_ID,
        securityGroupIds: region.ec2?.securityGroupIds ?? config.EC2_SECURITY_GROUP_IDS,
        volumeType: config.EC2_VOLUME_TYPE,
        volumeDevice: config.EC2_VOLUME_DEVICE,
        pageSize: config.EC2_PAGE_SIZE,
      });
    }
    const sim = new SimulatedCloudProvider({
      region: region.id,
      addressBlock: index,
      ...(region.simulator?.capacity !== undefined ? { capacity: region.simulator.capacity } : {}),
      bootDelayMs: config.SIMULATOR_BOOT_DELAY_MS,
      startDelayMs: config.SIMULATOR_START_DELAY_MS,
      stopDelayMs: config.SIMULATOR_STOP_DELAY_MS,
      attachDelayMs: config.SIMULATOR_ATTACH_DELAY_MS,
      detachDelayMs: config.SIMULATOR_DETACH_DELAY_MS,
      jitter: config.SIMULATOR_JITTER,
      pageSize: config.SIMULATOR_PAGE_SIZE,
      ...(drive ? { now: drive.now, random: drive.random, realTime: false } : {}),
      ...(hosts ? { hosts } : {}),
    });
    simulated.set(region.id, sim);
    return sim;
  };
  const clouds = config.REGIONS.map((r, i) => ({ region: r, cloud: regionCloud(r, i) }));
  const simulatedCloud = simulated.get(config.REGIONS[0]!.id);
  /** The simulated region whose instance has this address. */
  const simAt = (ip: string) => [...simulated.values()].find((sim) => sim.owns(ip));
  const beacons = simulatedCloud
    ? new SimulatedBeacons(new Map(config.REGIONS.map((r) => [r.id, r.simulator?.latencyMs ?? 0])))
    : undefined;
  let streamingHost: StreamingHost;
  if (config.STREAMING_HOST === "sunshine") {
    streamingHost = new SunshineStreamingHost({
      urlTemplate: config.STREAMING_HOST_URL_TEMPLATE,
      credentials,
      // Pinned to what the session's own host agent reported first (signed with the session's key); until it has
      // reported, every Sunshine call is refused rather than sent unpinned.
      fingerprint: async (sessionId) => (await findSession(db, sessionId))?.hostCertSha256 ?? undefined,
      timeoutMs: config.INTERNAL_CALL_TIMEOUT_MS,
    });
  } else {
    simulatedHost = new SimulatedStreamingHost({
      readyDelayMs: config.SIMULATOR_HOST_READY_DELAY_MS,
      ...(drive ? { now: drive.now } : {}),
      credentials,
      installed: (ip) => simAt(ip)?.installedCredentials(ip),
      clientsOf: (ip) => simAt(ip)?.hostClientsAt(ip),
      ...(simulatedCloud ? { volumeReady: (ip: string) => simAt(ip)?.volumeReady(ip) ?? false } : {}),
    });
    streamingHost = simulatedHost;
  }
  const privateNetwork =
    overrides.privateNetwork ?? privateNetworkFrom(config, db, (ip) => simAt(ip)?.hostTags(ip) ?? []);
  const hostSecrets = new HostSecrets(vault, {
    network: privateNetwork,
    db,
    clock: systemClock,
    keyTtlSeconds: config.VPN_HOST_KEY_TTL_SECONDS,
    reports: { queueUrl: reportQueueUrl, region: config.AWS_REGION },
  });
  const assigner: HostAssigner = hosts
    ? new SimulatedHostAssigner(
        hosts,
        {
          installCredentials: (instanceId, credentials) => {
            for (const sim of simulated.values()) sim.installCredentials(instanceId, credentials);
          },
        },
        simulatedHost,
      )
    : new HttpsHostAssigner({ port: config.HOST_ASSIGN_PORT, timeoutMs, poolKey: (id) => vault.poolKey(id) });
  const fleets = clouds.map(({ region, cloud }) => ({
    id: region.id,
    name: region.name,
    availabilityZone: region.availabilityZone,
    beaconUrl:
      region.beaconUrl ?? `http://127.0.0.1:${config.SIMULATOR_BEACON_PORT}/${encodeURIComponent(region.id)}`,
    cloud: withHostSecrets(cloud, hostSecrets),
  }));
  const regions = new RegionDirectory(fleets);
  return {
    regions,
    cloud: fleets[0]!.cloud,
    hostSecrets,
    assigner,
    streamingHost,
    privateNetwork,
    accounts: createAccountsClient({ baseUrl: config.ACCOUNTS_URL, timeoutMs }),
    billing: createBillingClient({ baseUrl: config.BILLING_URL, timeoutMs }),
    ...(simulatedCloud
      ? {
          simulator: {
            cloud: simulatedCloud,
            regions: simulated,
            streamingHost: simulatedHost,
            beacons: {
              server: beacons!,
              // Regions without a beacon of their own answer from the simulator's.
              adopt: (base: string) => {
                for (const [i, fleet] of fleets.entries()) {
                  if (!config.REGIONS[i]!.beaconUrl)
                    fleet.beaconUrl = `${base}/${encodeURIComponent(fleet.id)}`;
                }
              },
            },
            close: async () => {
              await beacons!.close();
              for (const sim of simulated.values()) await sim.close();
            },
          },
        }
      : {}),
    vault,
    agentKey: vault.agentKeys,
    reportQueueUrl,
  };
}

/** Hosted Tailscale's slot tags, leased per playing account in the sessions database. */
export function slotLeases(db: SessionsDb, size: number): SlotLeases {
  return {
    lease: (accountId, clear) => leaseSlot(db, accountId, size, clear),
    find: (accountId) => findSlot(db, accountId),
  };
}

/** The private network's control plane: Headscale, hosted Tailscale (slots leased in `db`) or the simulator. */
export function privateNetworkFrom(
  config: SessionsConfig,
  db: SessionsDb,
  simulatedHostTags: (ip: string) => string[] = () => [],
): PrivateNetwork {
  const timeoutMs = config.INTERNAL_CALL_TIMEOUT_MS;
  if (config.PRIVATE_NETWORK === "headscale") {
    const apiUrl = config.HEADSCALE_URL!;
    return new HeadscalePrivateNetwork({
      apiUrl,
      apiKey: config.HEADSCALE_API_KEY,
      timeoutMs,
      loginServer: config.HEADSCALE_LOGIN_SERVER ?? apiUrl,
    });
  }
  if (config.PRIVATE_NETWORK === "tailscale") {
    return new TailscalePrivateNetwork(
      {
        apiUrl: config.TAILSCALE_API_URL,
        tailnet: config.TAILSCALE_TAILNET,
        apiKey: config.TAILSCALE_API_KEY,
        timeoutMs,
        deviceTags: config.VPN_KEY_TAGS,
        hostTag: config.VPN_HOST_TAG,
        devicesCacheMs: config.TAILSCALE_DEVICES_CACHE_MS,
      },
      slotLeases(db, config.TAILSCALE_SLOTS),
    );
  }
  return new SimulatedPrivateNetwork(simulatedHostTags);
}

/** The use cases' settings, read from config once. */
export function sessionSettingsFrom(config: SessionsConfig): SessionSettings {
  return {
    ratePerMinute: config.SESSION_RATE_PER_MINUTE,
    currency: config.SESSION_CURRENCY,
    defaultIdleTimeoutMinutes: config.SESSION_IDLE_TIMEOUT_MINUTES,
    defaultMaxLengthMinutes: config.SESSION_MAX_LENGTH_MINUTES,
    availabilityZone: config.REGIONS[0]!.availabilityZone,
    capacityRetryAfterSeconds: config.CLOUD_CAPACITY_RETRY_AFTER_SECONDS,
    autoMaxRttMs: config.AUTO_MAX_RTT_MS,
    queue: {
      maxWaitMs: config.QUEUE_MAX_WAIT_MINUTES * 60_000,
      typicalIntervalMs: config.QUEUE_TYPICAL_INTERVAL_SECONDS * 1000,
    },
    play: {
      minuteMs: config.SESSION_MINUTE_MS,
      idleWarningMinutes: config.IDLE_WARNING_MINUTES,
      maxLengthWarningMinutes: config.MAX_LENGTH_WARNING_MINUTES,
      extensionMinutes: config.SESSION_EXTENSION_MINUTES,
      hostStaleMs: config.HOST_REPORT_STALE_MS,
      hostLostMs: config.HOST_LOST_AFTER_MS,
    },
    idempotencyTtlHours: config.IDEMPOTENCY_TTL_HOURS,
    pairing: {
      attempts: config.PAIRING_RETRY_ATTEMPTS,
      retryDelayMs: config.PAIRING_RETRY_DELAY_MS,
      pinTtlSeconds: config.PAIRING_PIN_TTL_SECONDS,
      pinHashSecret: config.PIN_HASH_SECRET,
    },
    streamingPort: config.STREAMING_PORT,
    privateNetwork: {
      keyTtlSeconds: config.VPN_KEY_TTL_SECONDS,
      maxLiveKeys: config.VPN_KEY_MAX_LIVE,
    },
    reconciler: {
      batchSize: config.RECONCILER_BATCH_SIZE,
      leaseMs: config.RECONCILER_LEASE_MS,
      startTimeoutMs: config.SESSION_START_TIMEOUT_MS,
      describeGraceMs: config.RECONCILER_DESCRIBE_GRACE_MS,
    },
    pool: {
      hot: {
        min: config.POOL_HOT_MIN,
        max: config.POOL_HOT_MAX,
        coverMinutes: config.POOL_HOT_COVER_MINUTES,
      },
      warm: {
        min: config.POOL_WARM_MIN,
        max: config.POOL_WARM_MAX,
        coverMinutes: config.POOL_WARM_COVER_MINUTES,
      },
      shrinkAfterMs: config.POOL_SHRINK_AFTER_MINUTES * 60_000,
      launchTimeoutMs: config.POOL_LAUNCH_TIMEOUT_MINUTES * 60_000,
      changesPerTick: config.POOL_CHANGES_PER_TICK,
      runningHourCost: config.POOL_RUNNING_HOUR_COST,
      stoppedHourCost: config.POOL_STOPPED_HOUR_COST,
    },
    startEstimates: startEstimatesFrom(config),
  };
}

/**
 * Poll's start estimates until a day of starts has measured them: config's, else EC2's typical times, else (the
 * simulator, npm start) what its own delays and a reconciler pass add up to.
 */
function startEstimatesFrom(config: SessionsConfig): Record<Capacity, number> {
  const reconcile = config.RECONCILER_INTERVAL_MS;
  const typical: Record<Capacity, number> =
    config.CLOUD_PROVIDER === "ec2"
      ? { hot: 10_000, warm: 40_000, cold: 240_000 }
      : {
          hot: config.SIMULATOR_HOST_READY_DELAY_MS + reconcile,
          warm: config.SIMULATOR_START_DELAY_MS + config.SIMULATOR_HOST_READY_DELAY_MS + reconcile,
          cold: config.SIMULATOR_BOOT_DELAY_MS + config.SIMULATOR_HOST_READY_DELAY_MS + reconcile,
        };
  const configured = (seconds: number | undefined, fallback: number) =>
    seconds === undefined ? fallback : seconds * 1000;
  return {
    hot: configured(config.START_ESTIMATE_HOT_SECONDS, typical.hot),
    warm: configured(config.START_ESTIMATE_WARM_SECONDS, typical.warm),
    cold: configured(config.START_ESTIMATE_COLD_SECONDS, typical.cold),
  };
}

/** Outbox writes addressed by the platform's routing table, every queue name carrying this deployment's prefix. */
export function outboxPublisher(queueNamePrefix: string): EventPublisher {
  return createOutboxPublisher(queueNamePrefix);
}

/** Everything the use cases receive: adapters, the database, settings, the event publisher and the clock. */
export function domainDepsFor(
  config: SessionsConfig,
  adapters: SessionsAppDeps,
  db: SessionsDb,
  logger: Logger,
  clock: Clock = systemClock,
): SessionsDomainDeps {
  const { regions, cloud, streamingHost, privateNetwork, accounts, billing, hostSecrets, assigner } =
    adapters;
  const settings = sessionSettingsFrom(config);
  return {
    regions,
    cloud,
    streamingHost,
    privateNetwork,
    accounts,
    billing,
    hostSecrets,
    assigner,
    db,
    logger,
    clock,
    wake: new Wakeups(),
    estimates: new StartEstimates(settings.startEstimates),
    settings,
    events: outboxPublisher(config.QUEUE_NAME_PREFIX),
  };
}

export function reconcilerFor(deps: SessionsDomainDeps): Reconciler {
  return new Reconciler(deps, deps.settings.reconciler);
}

export interface SessionsWorkerOptions {
  events?: boolean;
  /** Where host reports come from and how their signatures are checked; omit to run without the consumer. */
  hostReports?: {
    agentKey: AgentKeyLookup;
    queueUrl(): Promise<string>;
    sqs?: SQSClient;
    concurrency?: number;
  };
  /** Closed last (the simulated hosts' agents). */
  simulator?: Pick<SimulatorControls, "close" | "beacons">;
}

/**
 * Drains the host-report queue in batches: each batch is checked and applied in one statement, then deleted
 * (a refused report is final, so it is deleted too). A batch that fails (database down) comes back after the
 * queue's visibility timeout.
 */
export async function startHostReportConsumer(
  deps: SessionsDomainDeps,
  config: SessionsConfig,
  reports: NonNullable<SessionsWorkerOptions["hostReports"]>,
): Promise<Closer[]> {
  const sqs = reports.sqs ?? sqsClientFromConfig(config);
  const queueUrl = await reports.queueUrl();
  const logger = deps.logger.child({ component: "host-reports" });
  const poller = startQueuePoller({
    sqs,
    queueUrl,
    waitTimeSeconds: config.QUEUE_WAIT_SECONDS,
    concurrency: reports.concurrency ?? 4,
    logger,
    handleBatch: async (messages) => {
      await ingestHostReports(
        deps,
        reports.agentKey,
        messages.map((m) => m.Body ?? ""),
      );
      await deleteMessages(sqs, queueUrl, messages, logger);
    },
  });
  return [() => poller.stop(), () => (reports.sqs ? undefined : sqs.destroy())];
}

/**
 * The event consumer and outbox relay, the host-report consumer, the reconciler, the orphan and play sweeps;
 * closers for runService's drain.
 */
export async function startSessionsWorkers(
  deps: SessionsDomainDeps,
  database: OpenedDatabase<typeof schema>,
  config: SessionsConfig,
  options: SessionsWorkerOptions = {},
): Promise<Closer[]> {
  const { logger } = deps;
  const closers: Closer[] = [];
  if (options.events !== false) {
    const events = await startEventWorkers({
      config,
      db: database.db,
      logger,
      handlers: sessionEventHandlers(deps),
    });
    closers.push(...events.closers);
  }
  const reconciler = reconcilerFor(deps);
  const log = logger.child({ component: "reconciler" });
  const reconcile = startPeriodicWorker(
    "reconciler",
    config.RECONCILER_INTERVAL_MS,
    async () => {
      const report = await reconciler.tick();
      if (Object.keys(report.transitions).length > 0 || report.volumesDeleted > 0)
        log.info(report, "reconciled");
    },
    log,
  );
  const orphans = startPeriodicWorker(
    "orphan-sweep",
    config.ORPHAN_SWEEP_INTERVAL_MS,
    async () => {
      const swept = await reconciler.sweepOrphans();
      if (swept.terminated.length > 0) log.warn(swept, "orphan instances terminated");
    },
    log,
  );
  const poolsOn = deps.settings.pool.hot.max + deps.settings.pool.warm.max > 0;
  const keeperId = `pool-keeper-${randomUUID()}`;
  const leaseMs = (intervalMs: number) => Math.max(30_000, 3 * intervalMs);
  // Each region keeps its own pool, sized from its own starts, in its fleet's zone.
  const pools = poolsOn
    ? deps.regions.fleets.map((fleet) => {
        const regional = inRegion(deps, fleet.id);
        const keeper = new PoolKeeper(regional);
        return startPeriodicWorker(
          `pool-keeper-${fleet.id}`,
          config.POOL_INTERVAL_MS,
          async () => {
            // One replica keeps a zone's pool at a time (a lease renewed by each tick); the others skip theirs.
            const held = await leasePoolKeeping(
              database.db,
              regional.settings.availabilityZone,
              keeperId,
              deps.clock.now(),
              leaseMs(config.POOL_INTERVAL_MS),
            );
            if (!held) return;
            const report = await keeper.tick();
            if (report.launched + report.woken + report.parked + report.terminated + report.orphans > 0)
              log.info({ ...report, region: fleet.id }, "capacity pool changed");
          },
          logger.child({ component: "pool-keeper", region: fleet.id }),
        );
      })
    : [];
  // The line: freed capacity goes to the first in line of each region, one replica per region at a time.
  const queueLog = logger.child({ component: "queue" });
  const queue = startPeriodicWorker(
    "queue",
    config.QUEUE_INTERVAL_MS,
    async () => {
      const held: string[] = [];
      for (const id of deps.regions.ids) {
        if (
          await leasePoolKeeping(
            database.db,
            `queue:${id}`,
            keeperId,
            deps.clock.now(),
            leaseMs(config.QUEUE_INTERVAL_MS),
          )
        )
          held.push(id);
      }
      const report = await serveQueue(deps, held);
      if (report.admitted + report.expired > 0) queueLog.info(report, "queue served");
    },
    queueLog,
  );
  let beaconRetry: NodeJS.Timeout | undefined;
  if (options.simulator?.beacons) {
    const { server, adopt } = options.simulator.beacons;
    // The regions work without their beacons; only measuring their latency locally does not. A port still held by
    // a process on its way out (a restart) is tried again for a minute.
    const listen = async (attempt: number): Promise<void> => {
      try {
        adopt(await server.listen(config.SIMULATOR_BEACON_PORT));
      } catch (err) {
        const again = attempt < 12;
        logger[again ? "warn" : "error"](
          { err, port: config.SIMULATOR_BEACON_PORT, attempt },
          again
            ? "the simulated regions' beacons could not listen yet"
            : "the simulated regions' beacons could not listen",
        );
        if (again) beaconRetry = setTimeout(() => void listen(attempt + 1), 5_000).unref();
      }
    };
    await listen(1);
  }
  const stopWaking = deps.wake.onReconciler(() => reconcile.kick());
  const playSweep = startPeriodicWorker(
    "play-sweep",
    config.IDLE_SWEEP_INTERVAL_MS,
    async () => {
      const report = await sweepPlay(deps);
      if (report.warned + report.stopped + report.lost > 0) logger.info(report, "play sweep");
    },
    logger.child({ component: "play-sweep" }),
  );
  const stopCounting = onScrape(async () => {
    const counts = await countActiveSessionsByState(database.db);
    for (const state of currentStates) metrics.sessionsByState.labels(state).set(counts.get(state) ?? 0);
    const lengths = await queueLengths(database.db);
    for (const id of deps.regions.ids) metrics.queueLength.labels(id).set(lengths.get(id) ?? 0);
    const ages = await hostReportAges(database.db, deps.clock.now(), config.HOST_REPORT_STALE_MS);
    metrics.hostReportAge.labels("max").set(ages.max);
    metrics.hostReportAge.labels("p50").set(ages.p50);
    metrics.sessionsWithoutReports.set(ages.silent);
  });
  if (options.hostReports)
    closers.unshift(...(await startHostReportConsumer(deps, config, options.hostReports)));
  closers.unshift(
    () => reconcile.stop(),
    () => orphans.stop(),
    () => playSweep.stop(),
    ...pools.map((pool) => () => pool.stop()),
    stopWaking,
    () => queue.stop(),
    () => clearTimeout(beaconRetry),
    stopCounting,
  );
  if (options.simulator) closers.push(() => options.simulator!.close());
  return closers;
}

export interface SessionsService {
  app: RequestListener;
  /** Starts the event consumer and outbox relay, the reconciler and the sweeps; closers for the drain. */
  workers(): Promise<Closer[]>;
}

/** The composition root: adapters, settings and the use cases' dependencies built once, shared by app and workers. */
export function composeSessions(context: SessionsContext): SessionsService {
  const { config, logger, database } = context;
  const adapters = buildAdapters(config, database.db, logger);
  const deps = domainDepsFor(config, adapters, database.db, logger);
  return {
    app: createApp(context, deps, adapters.simulator),
    workers: () =>
      startSessionsWorkers(deps, database, config, {
        hostReports: { agentKey: adapters.agentKey, queueUrl: adapters.reportQueueUrl },
        ...(adapters.simulator ? { simulator: adapters.simulator } : {}),
      }),
  };
}
