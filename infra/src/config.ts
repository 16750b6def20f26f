import * as pulumi from "@pulumi/pulumi";
import {
  cidrsOverlap,
  cpuCores,
  fail,
  HOST_NAME,
  integerIn,
  ipv4Cidr,
  matching,
  memoryBytes,
  unique,
} from "./config-checks";
import { DEPLOYABLES, type DeployableName } from "./service-catalog";
import { GPU_FAMILIES, gpuFamilyOf } from "./streaming-image-versions";

/** Node group sizing; one managed node group per entry, spread over every private subnet. */
export interface NodeGroupConfig {
  name: string;
  instanceTypes: string[];
  capacityType: "ON_DEMAND" | "SPOT";
  minSize: number;
  desiredSize: number;
  maxSize: number;
  diskSizeGiB: number;
}

export interface DatabaseConfig {
  engineVersion: string;
  instanceClass: string;
  allocatedStorageGiB: number;
  maxAllocatedStorageGiB: number;
  multiAz: boolean;
  backupRetentionDays: number;
  deletionProtection: boolean;
  performanceInsights: boolean;
}

export interface RedisConfig {
  engineVersion: string;
  nodeType: string;
  /** Primary plus replicas; 2 or more turns on automatic failover across AZs. */
  nodes: number;
  snapshotRetentionDays: number;
}

export interface QueueConfig {
  /** Receives before a message moves to the DLQ. */
  maxReceiveCount: number;
  visibilityTimeoutSeconds: number;
  retentionDays: number;
  dlqRetentionDays: number;
}

export interface WorkloadConfig {
  /** Minimum replicas per deployable (the HPA floor); every deployable must be listed. */
  replicas: Record<DeployableName | "otel-collector", number>;
  maxReplicas: number;
  targetCpuPercent: number;
  requests: { cpu: string; memory: string };
  limits: { cpu: string; memory: string };
}

export interface StreamingConfig {
  /**
   * Override: start instances from this AMI instead of the image the stack builds (infra/streaming-image). Unset,
   * the launch template uses the stack's own image.
   */
  amiId?: string;
  /** Bump to rebuild the image with current Ubuntu packages and driver when nothing in the repository changed. */
  imageRevision?: number;
  instanceType: string;
  volumeSizeGiB: number;
  /** Root device of the AMI (e.g. /dev/sda1 for Windows and Ubuntu images, /dev/xvda for Amazon Linux). */
  rootDeviceName: string;
  /**
   * The private network's address range (Tailscale: 100.64.0.0/10). Players reach the streaming ports only
   * through it; the ports are never opened to the internet.
   */
  privateNetworkCidrs: string[];
  /** Streaming ports players connect to (Sunshine/Moonlight: TCP 47984, 47989, 48010; UDP 47998-48010). */
  tcpPorts: number[];
  udpPortRange: { from: number; to: number };
  /** The streaming host's management API (Sunshine 47990), reachable from the sessions service only. */
  apiPort: number;
  /**
   * A pool instance's assignment endpoint (the host agent's HTTPS, 47991), which the sessions service calls at the
   * instance's VPC address to hand it a session; reachable from the sessions service only, like `apiPort`.
   */
  assignPort: number;
}

/** One capacity pool's sizing: its target is starts-per-hour x coverMinutes / 60, clamped to [min, max]. */
export interface PoolSizing {
  min: number;
  max: number;
  coverMinutes: number;
}

/**
 * Capacity pools: pre-booted streaming instances a start claims, hot (running) before warm (stopped) before a cold
 * launch. min and max 0 for both turns the pools off. Passed to the sessions service as POOL_* (platform-values.ts).
 */
export interface CapacityPoolsConfig {
  hot: PoolSizing;
  warm: PoolSizing;
  /** Idle this long, the pools shrink back towards their floor. */
  shrinkAfterMinutes: number;
  /** A pool launch not standing by after this long is terminated and replaced. */
  launchTimeoutMinutes: number;
  /** Idle capacity's cost in minor units of SESSION_CURRENCY per instance hour: running (the instance type). */
  runningHourCost: number;
  /** ... and stopped (its root volume), for the cgs_pool_idle_cost_per_hour metric. */
  stoppedHourCost: number;
}

/**
 * The private network's control plane: hosted Tailscale (a fixed pool of slot tags in a policy written once,
 * `tailnetAclPolicy`), or Headscale run by the chart on the platform's PostgreSQL behind the ingress on `host`.
 */
export type PrivateNetworkConfig =
  | {
      kind: "tailscale";
      /** Tailnet the keys are issued in ("-" = the API key's default tailnet). */
      tailnet: string;
      /** Slot tags in the policy: the most accounts playing at once (TAILSCALE_SLOTS of sessions). */
      slots: number;
    }
  | {
      kind: "headscale";
      /** Public host name devices and streaming hosts log in at (its own certificate and ingress rule). */
      host: string;
    };

/**
 * A region with a streaming fleet, as the stack file lists it (`cgs:regions`, in the order a start without
 * measurements tries them). The home region (`aws:region`: cluster, database, queues) runs its fleet in the
 * cluster's VPC and takes no `cidr`; every other region gets a VPC of `cidr`, peered with the cluster's.
 */
export interface RegionEntry {
  /** An AWS region id (us-east-1); also the region id players and the API see. */
  id: string;
  /** What players read ("US East (N. Virginia)"). */
  name: string;
  /** The fleet VPC's range (another region's only); overlaps neither the cluster's VPC nor another fleet's. */
  cidr?: string;
  /** Zone of the fleet's subnet, account volumes and instances; default the home's first zone, elsewhere <id>a. */
  availabilityZone?: string;
  /**
   * With `cgs:streaming.amiId` (an AMI of the home region), the same image's copy in this region: AMI ids are
   * regional. Without the override, Image Builder copies the built image to every region itself.
   */
  amiId?: string;
}

/** A fleet region after loading: zone filled in, `home` marking the cluster's region. */
export interface FleetRegionConfig {
  id: string;
  name: string;
  home: boolean;
  cidr?: string;
  availabilityZone: string;
  amiId?: string;
}

export interface PlatformConfig {
  environment: string;
  region: string;
  vpcCidr: string;
  availabilityZones: string[];
  /** One NAT gateway per AZ (resilient) instead of a single shared one (cheaper). */
  natGatewayPerAz: boolean;
  kubernetesVersion: string;
  nodeGroups: NodeGroupConfig[];
  database: DatabaseConfig;
  redis: RedisConfig;
  queues: QueueConfig;
  workloads: WorkloadConfig;
  streaming: StreamingConfig;
  /** Every streaming fleet's region, the home region among them, in the configured order. */
  regions: FleetRegionConfig[];
  capacityPools: CapacityPoolsConfig;
  privateNetwork: PrivateNetworkConfig;
  imageTag: string;
  /** Public host name of the platform (the gateway's ingress). */
  domain: string;
  /** Route 53 hosted zone for `domain`: validates the certificate and holds the alias record. */
  route53ZoneId: string;
  oidcIssuer: string;
  oidcAudience: string;
  keycloakAdminClientId: string;
  mailFrom: string;
  /** Send traces to AWS X-Ray (otherwise the collector only logs them). */
  xrayTracing: boolean;
  /** Extra non-secret environment per deployable (prices, limits, log level), merged last. */
  extraEnv: Partial<Record<DeployableName, Record<string, string>>>;
  secrets: {
    stripeSecretKey: pulumi.Output<string>;
    stripeWebhookSecret: pulumi.Output<string>;
    keycloakAdminClientSecret: pulumi.Output<string>;
    smtpUrl: pulumi.Output<string>;
    /** The Tailscale API access token, or the Headscale API key (empty until set after the first deployment). */
    privateNetworkApiKey: pulumi.Output<string>;
  };
}

/** Every `cgs:` key a stack must set (secrets excluded); both stack files carry exactly these. */
export const REQUIRED_CONFIG_KEYS = [
  "environment",
  "vpcCidr",
  "availabilityZones",
  "natGatewayPerAz",
  "kubernetesVersion",
  "nodeGroups",
  "database",
  "redis",
  "queues",
  "workloads",
  "streaming",
  "regions",
  "capacityPools",
  "privateNetwork",
  "imageTag",
  "domain",
  "route53ZoneId",
  "oidcIssuer",
  "oidcAudience",
  "keycloakAdminClientId",
  "mailFrom",
  "xrayTracing",
  "extraEnv",
] as const;

/** Set with `pulumi config set --secret cgs:<key> ...`; never committed in clear text. */
export const SECRET_CONFIG_KEYS = [
  "stripeSecretKey",
  "stripeWebhookSecret",
  "keycloakAdminClientSecret",
  "smtpUrl",
  "tailscaleApiKey",
  "headscaleApiKey",
] as const;

function validate(c: Omit<PlatformConfig, "secrets">): void {
  if (c.availabilityZones.length < 2) fail("cgs:availabilityZones needs at least two zones");
  if (c.nodeGroups.length === 0) fail("cgs:nodeGroups needs at least one node group");
  for (const g of c.nodeGroups) {
    if (!(g.minSize <= g.desiredSize && g.desiredSize <= g.maxSize)) {
      fail(`node group ${g.name}: expected minSize <= desiredSize <= maxSize`);
    }
  }
  for (const name of [...DEPLOYABLES.map((d) => d.name), "otel-collector" as const]) {
    const n = c.workloads.replicas[name];
    if (!Number.isInteger(n) || n < 1) fail(`cgs:workloads.replicas.${name} must be a positive integer`);
  }
  if (c.queues.maxReceiveCount < 1) fail("cgs:queues.maxReceiveCount must be at least 1");
  if (c.redis.nodes < 1) fail("cgs:redis.nodes must be at least 1");
  if (!GPU_FAMILIES[gpuFamilyOf(c.streaming.instanceType)]) {
    fail(
      `cgs:streaming.instanceType must be of a GPU family the image supports (${Object.keys(GPU_FAMILIES).join(", ")})`,
    );
  }
  if (c.streaming.amiId !== undefined && !/^ami-[0-9a-f]{8,17}$/.test(c.streaming.amiId)) {
    fail("cgs:streaming.amiId must be an AMI id (ami-...) or unset");
  }
  const net = c.privateNetwork as { kind?: string; slots?: unknown; host?: unknown; tailnet?: unknown };
  if (net.kind === "tailscale") {
    if (typeof net.tailnet !== "string" || !net.tailnet) fail("cgs:privateNetwork.tailnet must be set");
    if (!Number.isInteger(net.slots) || (net.slots as number) < 2) {
      fail("cgs:privateNetwork.slots must be an integer of at least 2");
    }
  } else if (net.kind === "headscale") {
    if (typeof net.host !== "string" || !/^[a-z0-9.-]+$/.test(net.host)) {
      fail("cgs:privateNetwork.host must be a host name");
    }
  } else {
    fail('cgs:privateNetwork.kind must be "tailscale" or "headscale"');
  }
  const known = new Set<string>(DEPLOYABLES.map((d) => d.name));
  for (const name of Object.keys(c.extraEnv)) {
    if (!known.has(name)) fail(`cgs:extraEnv.${name} names no deployable`);
  }
  validateCapacityPools(c.capacityPools);
  validateStackWide(c);
}

function validateCapacityPools(given: CapacityPoolsConfig): void {
  const key = "cgs:capacityPools";
  const pools = (given ?? {}) as Partial<CapacityPoolsConfig>;
  for (const kind of ["hot", "warm"] as const) {
    const p = pools[kind] ?? ({} as Partial<PoolSizing>);
    const min = integerIn(`${key}.${kind}.min`, p.min, 0);
    const max = integerIn(`${key}.${kind}.max`, p.max, 0);
    if (min > max) fail(`${key}.${kind}.min ${min} is above ${key}.${kind}.max ${max}`);
    integerIn(`${key}.${kind}.coverMinutes`, p.coverMinutes, 1, 24 * 60);
  }
  integerIn(`${key}.shrinkAfterMinutes`, pools.shrinkAfterMinutes, 1);
  integerIn(`${key}.launchTimeoutMinutes`, pools.launchTimeoutMinutes, 1);
  // Whole minor units, like every amount of money the platform configures (SESSION_RATE_PER_MINUTE).
  integerIn(`${key}.runningHourCost`, pools.runningHourCost, 0);
  integerIn(`${key}.stoppedHourCost`, pools.stoppedHourCost, 0);
}

const REGION_ID = /^[a-z]{2}(-[a-z]+)+-\d$/;

/**
 * `cgs:regions` checked and completed: unique region ids, names, zones of their own region, and fleet VPC ranges
 * that overlap neither each other, the cluster's VPC (their peering routes would be ambiguous) nor the private
 * network. The home region (`aws:region`) is placed first when the list leaves it out.
 */
export function loadRegions(
  given: unknown,
  c: Pick<PlatformConfig, "region" | "vpcCidr" | "availabilityZones" | "streaming">,
): FleetRegionConfig[] {
  const key = "cgs:regions";
  if (!Array.isArray(given) || given.length === 0) fail(`${key} must be a non-empty list of regions`);
  const entries = given as Partial<RegionEntry>[];
  const listed = entries.some((r) => r?.id === c.region)
    ? entries
    : [{ id: c.region, name: c.region }, ...entries];
  const regions = listed.map((r): FleetRegionConfig => {
    const at = `${key}[${entries.indexOf(r) === -1 ? "home" : entries.indexOf(r)}]`;
    if (typeof r !== "object" || r === null) fail(`${at} must be {id, name, cidr, availabilityZone}`);
    const id = matching(`${at}.id`, r.id, REGION_ID, "an AWS region such as us-east-1");
    const name = matching(`${at}.name`, r.name, /^\S(.{0,58}\S)?$/, "a name of 1 to 60 characters");
    const home = id === c.region;
    if (home && r.cidr !== undefined) {
      fail(`${at}.cidr: the home region ${id} runs its fleet in cgs:vpcCidr; leave cidr out`);
    }
    if (home && r.amiId !== undefined) fail(`${at}.amiId: the home region's override is cgs:streaming.amiId`);
    const cidr = home ? undefined : ipv4Cidr(`${at}.cidr`, r.cidr, 16, 24);
    const zone = r.availabilityZone ?? (home ? c.availabilityZones[0] : `${id}a`);
    if (typeof zone !== "string" || !new RegExp(`^${id}[a-z]$`).test(zone)) {
      fail(`${at}.availabilityZone: ${JSON.stringify(zone)} is not a zone of ${id}`);
    }
    if (home && !c.availabilityZones.includes(zone as string)) {
      fail(
        `${at}.availabilityZone: the home fleet's zone must be one of cgs:availabilityZones (got ${zone})`,
      );
    }
    if (!home && c.streaming.amiId !== undefined) {
      matching(
        `${at}.amiId`,
        r.amiId,
        /^ami-[0-9a-f]{8,17}$/,
        `this region's copy of cgs:streaming.amiId (AMI ids are regional), an AMI id`,
      );
    } else if (!home && r.amiId !== undefined) {
      fail(`${at}.amiId is only used with cgs:streaming.amiId; the built image is copied to ${id} itself`);
    }
    return {
      id,
      name,
      home,
      ...(cidr ? { cidr } : {}),
      availabilityZone: zone,
      ...(home ? {} : { amiId: r.amiId }),
    };
  });
  unique(
    `${key} ids`,
    regions.map((r) => r.id),
  );
  const ranges = [
    { what: "cgs:vpcCidr", cidr: c.vpcCidr },
    ...c.streaming.privateNetworkCidrs.map((cidr) => ({ what: "cgs:streaming.privateNetworkCidrs", cidr })),
  ];
  for (const r of regions) {
    if (!r.cidr) continue;
    const clash = ranges.find((other) => cidrsOverlap(other.cidr, r.cidr!));
    if (clash) fail(`${key}: ${r.id}'s cidr ${r.cidr} overlaps ${clash.what} ${clash.cidr}`);
    ranges.push({ what: `${key} ${r.id}`, cidr: r.cidr });
  }
  return regions;
}

/** What no single component sees: names derived from the environment, the zones' region, the workloads' sizing. */
function validateStackWide(c: Omit<PlatformConfig, "secrets">): void {
  // Becomes cgs-<environment>: ElastiCache ids stop at 40 characters, IAM role names at 64, ECR names are lowercase.
  matching(
    "cgs:environment",
    c.environment,
    /^[a-z][a-z0-9-]{0,19}$/,
    "a lowercase name of at most 20 characters",
  );
  matching("aws:region", c.region, /^[a-z]{2}(-[a-z]+)+-\d$/, "an AWS region such as eu-west-1");
  for (const zone of c.availabilityZones) {
    if (typeof zone !== "string" || !new RegExp(`^${c.region}[a-z]$`).test(zone)) {
      fail(`cgs:availabilityZones: ${JSON.stringify(zone)} is not a zone of aws:region ${c.region}`);
    }
  }
  unique("cgs:availabilityZones", c.availabilityZones);

  const w = c.workloads;
  const floors = Object.values(w.replicas);
  integerIn("cgs:workloads.maxReplicas", w.maxReplicas, Math.max(...floors), 100);
  integerIn("cgs:workloads.targetCpuPercent", w.targetCpuPercent, 1, 100);
  if (
    cpuCores("cgs:workloads.requests.cpu", w.requests?.cpu) >
    cpuCores("cgs:workloads.limits.cpu", w.limits?.cpu)
  ) {
    fail(`cgs:workloads.requests.cpu ${w.requests.cpu} is above cgs:workloads.limits.cpu ${w.limits.cpu}`);
  }
  const memory = ["cgs:workloads.requests.memory", "cgs:workloads.limits.memory"] as const;
  if (memoryBytes(memory[0], w.requests?.memory) > memoryBytes(memory[1], w.limits?.memory)) {
    fail(`${memory[0]} ${w.requests.memory} is above ${memory[1]} ${w.limits.memory}`);
  }

  // Images are pushed once per tag: the repositories' tags are immutable.
  matching(
    "cgs:imageTag",
    c.imageTag,
    /^(?!latest$)[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/,
    "an image tag other than latest",
  );
  matching("cgs:domain", c.domain, HOST_NAME, "a lowercase host name such as play.example.com");
  matching("cgs:route53ZoneId", c.route53ZoneId, /^Z[A-Z0-9]{1,32}$/, "a Route 53 hosted zone id (Z...)");
  matching("cgs:oidcIssuer", c.oidcIssuer, /^https:\/\/[^\s/]+(\/\S*)?$/, "an https URL");
  matching("cgs:oidcAudience", c.oidcAudience, /^\S+$/, "a non-empty audience");
  matching("cgs:keycloakAdminClientId", c.keycloakAdminClientId, /^\S+$/, "a non-empty client id");
  matching("cgs:mailFrom", c.mailFrom, /^[^\s@]+@[^\s@]+\.[^\s@]+$/, "an e-mail address");
  for (const [name, env] of Object.entries(c.extraEnv)) {
    for (const [variable, value] of Object.entries(env ?? {})) {
      matching(`cgs:extraEnv.${name}`, variable, /^[A-Z_][A-Z0-9_]*$/, "keyed by environment variable names");
      // YAML reads 10 as a number; a process reads only strings, so say so here instead of coercing silently.
      if (typeof value !== "string") fail(`cgs:extraEnv.${name}.${variable} must be a quoted string`);
    }
  }
}

export function loadPlatformConfig(): PlatformConfig {
  const cfg = new pulumi.Config("cgs");
  const awsCfg = new pulumi.Config("aws");
  const plain: Omit<PlatformConfig, "secrets"> = {
    environment: cfg.require("environment"),
    region: awsCfg.require("region"),
    vpcCidr: cfg.require("vpcCidr"),
    availabilityZones: cfg.requireObject<string[]>("availabilityZones"),
    natGatewayPerAz: cfg.requireBoolean("natGatewayPerAz"),
    kubernetesVersion: cfg.require("kubernetesVersion"),
    nodeGroups: cfg.requireObject<NodeGroupConfig[]>("nodeGroups"),
    database: cfg.requireObject<DatabaseConfig>("database"),
    redis: cfg.requireObject<RedisConfig>("redis"),
    queues: cfg.requireObject<QueueConfig>("queues"),
    workloads: cfg.requireObject<WorkloadConfig>("workloads"),
    streaming: cfg.requireObject<StreamingConfig>("streaming"),
    regions: [],
    capacityPools: cfg.requireObject<CapacityPoolsConfig>("capacityPools"),
    privateNetwork: cfg.requireObject<PrivateNetworkConfig>("privateNetwork"),
    imageTag: cfg.require("imageTag"),
    domain: cfg.require("domain"),
    route53ZoneId: cfg.require("route53ZoneId"),
    oidcIssuer: cfg.require("oidcIssuer"),
    oidcAudience: cfg.require("oidcAudience"),
    keycloakAdminClientId: cfg.require("keycloakAdminClientId"),
    mailFrom: cfg.require("mailFrom"),
    xrayTracing: cfg.requireBoolean("xrayTracing"),
    extraEnv: cfg.requireObject<PlatformConfig["extraEnv"]>("extraEnv"),
  };
  validate(plain);
  // After validate: the zones, region and private network the regions are checked against are known good.
  plain.regions = loadRegions(cfg.requireObject<unknown>("regions"), plain);
  return {
    ...plain,
    secrets: {
      stripeSecretKey: cfg.requireSecret("stripeSecretKey"),
      stripeWebhookSecret: cfg.requireSecret("stripeWebhookSecret"),
      keycloakAdminClientSecret: cfg.requireSecret("keycloakAdminClientSecret"),
      smtpUrl: cfg.requireSecret("smtpUrl"),
      // Headscale's key exists only once Headscale runs: the first `pulumi up` deploys it without one.
      privateNetworkApiKey:
        plain.privateNetwork.kind === "tailscale"
          ? cfg.requireSecret("tailscaleApiKey")
          : (cfg.getSecret("headscaleApiKey") ?? pulumi.secret("")),
    },
  };
}
