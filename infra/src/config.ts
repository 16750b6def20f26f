import * as pulumi from "@pulumi/pulumi";
import { DEPLOYABLES, type DeployableName } from "./service-catalog";

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
  /** AMI of the streaming host image (built outside this repo). */
  amiId: string;
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

function fail(message: string): never {
  throw new Error(`invalid stack configuration: ${message}`);
}

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
