import type { RequestListener } from "node:http";
import type { Logger } from "pino";
import {
  createAccountsClient,
  createOutboxPublisher,
  systemClock,
  type Clock,
  metrics,
  onScrape,
  startEventWorkers,
  startPeriodicWorker,
  type Closer,
  type OpenedDatabase,
} from "@cgs/shared";
import { createBillingClient } from "./adapters/billing-client";
import type { CloudProvider } from "./adapters/cloud-provider";
import { withStreamingCredentials } from "./adapters/credential-issuing-cloud";
import { Ec2CloudProvider } from "./adapters/ec2-cloud-provider";
import { HeadscalePrivateNetwork } from "./adapters/headscale-private-network";
import { SimulatedPrivateNetwork, type PrivateNetwork } from "./adapters/private-network";
import { TailscalePrivateNetwork, type SlotLeases } from "./adapters/tailscale-private-network";
import { SimulatedCloudProvider } from "./adapters/simulated-cloud-provider";
import { SimulatedStreamingHost, SunshineStreamingHost, type StreamingHost } from "./adapters/streaming-host";
import { createApp, type SessionsAppDeps, type SessionsContext } from "./app";
import type { SessionsConfig } from "./config";
import type * as schema from "./data/schema";
import { findSlot, leaseSlot } from "./data/private-network-repository";
import { countActiveSessionsByState, type SessionsDb } from "./data/session-repository";
import { activeStates } from "./data/session-tables";
import { StreamingCredentialRepository } from "./data/streaming-credential-repository";
import { sessionEventHandlers } from "./events/session-event-handlers";
import { sweepIdleSessions } from "./domain/idle-sweep";
import { Reconciler } from "./domain/reconciler";
import { LOCAL_STREAMING_CREDENTIALS_KEY, StreamingCredentialVault } from "./domain/streaming-credentials";
import { type EventPublisher, type SessionSettings, type SessionsDomainDeps } from "./domain/session-deps";

/** Picks every adapter from config: simulators by default, EC2 / Sunshine / Tailscale when configured. */
export function buildAdapters(config: SessionsConfig, db: SessionsDb): SessionsAppDeps {
  const vault = new StreamingCredentialVault(
    new StreamingCredentialRepository(db),
    config.STREAMING_CREDENTIALS_KEY ?? LOCAL_STREAMING_CREDENTIALS_KEY,
  );
  const credentials = (sessionId: string) => vault.forSession(sessionId);
  let cloud: CloudProvider;
  let simulatedCloud: SimulatedCloudProvider | undefined;
  if (config.CLOUD_PROVIDER === "ec2") {
    cloud = new Ec2CloudProvider({
      region: config.CLOUD_REGION,
      endpoint: config.AWS_ENDPOINT_URL,
      tagPrefix: config.CLOUD_TAG_PREFIX,
      launchTemplate: config.EC2_LAUNCH_TEMPLATE,
      launchTemplateVersion: config.EC2_LAUNCH_TEMPLATE_VERSION,
      amiId: config.EC2_AMI_ID,
      instanceType: config.EC2_INSTANCE_TYPE,
      subnetId: config.EC2_SUBNET_ID,
      securityGroupIds: config.EC2_SECURITY_GROUP_IDS,
      volumeType: config.EC2_VOLUME_TYPE,
      volumeDevice: config.EC2_VOLUME_DEVICE,
      pageSize: config.EC2_PAGE_SIZE,
    });
  } else {
    simulatedCloud = new SimulatedCloudProvider({
      region: config.CLOUD_REGION,
      bootDelayMs: config.SIMULATOR_BOOT_DELAY_MS,
      pageSize: config.SIMULATOR_PAGE_SIZE,
    });
    cloud = simulatedCloud;
  }
  let streamingHost: StreamingHost;
  let simulatedHost: SimulatedStreamingHost | undefined;
  if (config.STREAMING_HOST === "sunshine") {
    streamingHost = new SunshineStreamingHost({
      urlTemplate: config.STREAMING_HOST_URL_TEMPLATE,
      credentials,
      timeoutMs: config.INTERNAL_CALL_TIMEOUT_MS,
    });
  } else {
    simulatedHost = new SimulatedStreamingHost({
      readyDelayMs: config.SIMULATOR_HOST_READY_DELAY_MS,
      credentials,
      installed: (ip) => simulatedCloud?.installedCredentials(ip),
    });
    streamingHost = simulatedHost;
  }
  const privateNetwork = privateNetworkFrom(config, db, (ip) => simulatedCloud?.hostTags(ip) ?? []);
  const timeoutMs = config.INTERNAL_CALL_TIMEOUT_MS;
  return {
    cloud: withStreamingCredentials(cloud, vault, {
      network: privateNetwork,
      db,
      clock: systemClock,
      keyTtlSeconds: config.VPN_HOST_KEY_TTL_SECONDS,
    }),
    streamingHost,
    privateNetwork,
    accounts: createAccountsClient({ baseUrl: config.ACCOUNTS_URL, timeoutMs }),
    billing: createBillingClient({ baseUrl: config.BILLING_URL, timeoutMs }),
    ...(simulatedCloud ? { simulator: { cloud: simulatedCloud, streamingHost: simulatedHost } } : {}),
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
    availabilityZone: config.CLOUD_AVAILABILITY_ZONE,
    capacityRetryAfterSeconds: config.CLOUD_CAPACITY_RETRY_AFTER_SECONDS,
    activityGranularityMs: config.SESSION_ACTIVITY_GRANULARITY_MS,
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
  const { cloud, streamingHost, privateNetwork, accounts, billing } = adapters;
  return {
    cloud,
    streamingHost,
    privateNetwork,
    accounts,
    billing,
    db,
    logger,
    clock,
    settings: sessionSettingsFrom(config),
    events: outboxPublisher(config.QUEUE_NAME_PREFIX),
  };
}

export function reconcilerFor(deps: SessionsDomainDeps): Reconciler {
  return new Reconciler(deps, deps.settings.reconciler);
}

export interface SessionsWorkerOptions {
  events?: boolean;
}

/** The event consumer and outbox relay, the reconciler and the idle sweep; closers for runService's drain. */
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
  const idleSweep = startPeriodicWorker(
    "idle-sweep",
    config.IDLE_SWEEP_INTERVAL_MS,
    () => sweepIdleSessions(deps),
    logger,
  );
  const stopCounting = onScrape(async () => {
    const counts = await countActiveSessionsByState(database.db);
    for (const state of activeStates) metrics.sessionsByState.labels(state).set(counts.get(state) ?? 0);
  });
  closers.unshift(
    () => reconcile.stop(),
    () => orphans.stop(),
    () => idleSweep.stop(),
    stopCounting,
  );
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
  const adapters = buildAdapters(config, database.db);
  const deps = domainDepsFor(config, adapters, database.db, logger);
  return {
    app: createApp(context, deps, adapters.simulator),
    workers: () => startSessionsWorkers(deps, database, config),
  };
}
