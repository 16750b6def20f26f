import {
  metrics,
  onScrape,
  startEventWorkers,
  startPeriodicWorker,
  type Closer,
  type OpenedDatabase,
  STREAMING_TCP_PORTS,
  STREAMING_UDP_PORT_RANGE,
} from "@cgs/shared";
import { createAccountsClient } from "./clients/accounts-client";
import { createBillingClient } from "./adapters/billing-client";
import type { CloudProvider } from "./adapters/cloud-provider";
import { withStreamingCredentials } from "./adapters/credential-issuing-cloud";
import { Ec2CloudProvider } from "./adapters/ec2-cloud-provider";
import {
  SimulatedPrivateNetwork,
  TailscalePrivateNetwork,
  type PrivateNetwork,
} from "./adapters/private-network";
import { SimulatedCloudProvider } from "./adapters/simulated-cloud-provider";
import { SimulatedStreamingHost, SunshineStreamingHost, type StreamingHost } from "./adapters/streaming-host";
import type { SessionsAppDeps } from "./app";
import type { SessionsConfig } from "./config";
import type * as schema from "./data/schema";
import { countActiveSessionsByState, type SessionsDb } from "./data/session-repository";
import { activeStates } from "./data/session-tables";
import { StreamingCredentialRepository } from "./data/streaming-credential-repository";
import { sessionEventHandlers } from "./events/session-event-handlers";
import { sweepIdleSessions } from "./domain/idle-sweep";
import { Reconciler } from "./domain/reconciler";
import { LOCAL_STREAMING_CREDENTIALS_KEY, StreamingCredentialVault } from "./domain/streaming-credentials";
import type { SessionsDomainDeps } from "./domain/session-deps";

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
  const privateNetwork: PrivateNetwork =
    config.PRIVATE_NETWORK === "tailscale"
      ? new TailscalePrivateNetwork({
          apiUrl: config.TAILSCALE_API_URL,
          tailnet: config.TAILSCALE_TAILNET,
          apiKey: config.TAILSCALE_API_KEY,
          timeoutMs: config.INTERNAL_CALL_TIMEOUT_MS,
          ownerTag: config.VPN_OWNER_TAG,
          ports: { tcpPorts: STREAMING_TCP_PORTS, udpPortRange: STREAMING_UDP_PORT_RANGE },
        })
      : new SimulatedPrivateNetwork((ip) => simulatedCloud?.hostTags(ip) ?? []);
  const timeoutMs = config.INTERNAL_CALL_TIMEOUT_MS;
  return {
    cloud: withStreamingCredentials(cloud, vault, {
      network: privateNetwork,
      hostTag: config.VPN_HOST_TAG,
      keyTtlSeconds: config.VPN_HOST_KEY_TTL_SECONDS,
    }),
    streamingHost,
    privateNetwork,
    accounts: createAccountsClient({ baseUrl: config.ACCOUNTS_URL, timeoutMs }),
    billing: createBillingClient({ baseUrl: config.BILLING_URL, timeoutMs }),
    ...(simulatedCloud ? { simulator: { cloud: simulatedCloud, streamingHost: simulatedHost } } : {}),
  };
}

export function reconcilerFor(deps: SessionsDomainDeps): Reconciler {
  const { config } = deps;
  return new Reconciler(deps, {
    batchSize: config.RECONCILER_BATCH_SIZE,
    leaseMs: config.RECONCILER_LEASE_MS,
    startTimeoutMs: config.SESSION_START_TIMEOUT_MS,
    describeGraceMs: config.RECONCILER_DESCRIBE_GRACE_MS,
  });
}

export interface SessionsWorkerOptions {
  events?: boolean;
}

/** The event consumer and outbox relay, the reconciler and the idle sweep; closers for runService's drain. */
export async function startSessionsWorkers(
  deps: SessionsDomainDeps,
  database: OpenedDatabase<typeof schema>,
  options: SessionsWorkerOptions = {},
): Promise<Closer[]> {
  const { config, logger } = deps;
  const closers: Closer[] = [];
  if (options.events !== false) {
    const events = await startEventWorkers({
      config,
      db: database.db,
      logger,
      handlers: sessionEventHandlers(config.QUEUE_NAME_PREFIX),
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
