import * as pulumi from "@pulumi/pulumi";
import { hostReportQueueName, serviceQueueNames } from "@cgs/shared";
import type { CapacityPoolsConfig, PrivateNetworkConfig, WorkloadConfig } from "./config";
import {
  DEPLOYABLES,
  envPrefix,
  type Deployable,
  type DeployableName,
  type SharedSecretName,
} from "./service-catalog";

/** Helm release and namespace of the platform chart; service-account names derive from them. */
export const RELEASE_NAME = "cgs";
export const NAMESPACE = "cgs";

export function serviceAccountName(deployable: string): string {
  return `${RELEASE_NAME}-${deployable}`;
}

export interface SecretEntry {
  secret: pulumi.Input<string>;
  keys: Record<string, string>;
}

/** Inbound queue name as the services spell it (shared/src/queue/event-routes.ts); infra adds the prefix. */
export function serviceQueueName(deployable: string): string {
  const name = (serviceQueueNames as Record<string, string>)[deployable];
  if (!name) throw new Error(`${deployable} owns no inbound queue in shared/src/queue/event-routes.ts`);
  return name;
}

/** One entry of the sessions service's REGIONS: a fleet region as the stack built it. */
export interface RegionEnvironment {
  id: string;
  name: string;
  /** The region's latency beacon (its Lambda function URL). */
  beaconUrl: pulumi.Input<string>;
  availabilityZone: string;
  ec2: {
    launchTemplate: pulumi.Input<string>;
    subnetId: pulumi.Input<string>;
    securityGroupIds: pulumi.Input<string>[];
  };
}

/** REGIONS of the sessions service: every fleet region in the configured order, as one JSON array. */
export function regionsEnvironment(regions: RegionEnvironment[]): pulumi.Output<string> {
  return pulumi.jsonStringify(pulumi.output(regions));
}

/** PORTAL_BEACON_ORIGINS of the gateway: the beacons' origins, which the portal's CSP lets the browser fetch. */
export function beaconOrigins(regions: RegionEnvironment[]): pulumi.Output<string> {
  return pulumi
    .all(regions.map((r) => r.beaconUrl))
    .apply((urls) => [...new Set(urls.map((u) => new URL(u).origin))].join(","));
}

export interface EnvironmentContext {
  /** QUEUE_NAME_PREFIX: every queue of the environment is <prefix>cgs-<service>. */
  queuePrefix: string;
  queueUrls: Partial<Record<DeployableName, pulumi.Input<string>>>;
  imageTag: string;
  /** The load balancer's subnets, trusted for X-Forwarded-For. */
  trustedProxyCidrs: string[];
  /**
   * The gateway's replica floor (GATEWAY_REPLICAS): the replica count while Redis is down until the chart's headless
   * Service (GATEWAY_PEERS_DNS) has answered with the pods actually serving.
   */
  gatewayReplicas: number;
  streaming: {
    launchTemplateId: pulumi.Input<string>;
    subnetId: pulumi.Input<string>;
    availabilityZone: string;
    tagPrefix: string;
    /** A pool instance's assignment endpoint (HOST_ASSIGN_PORT). */
    assignPort: number;
  };
  /** Every fleet region (the home region's first fleet among them), in the configured order. */
  regions: RegionEnvironment[];
  capacityPools: CapacityPoolsConfig;
  privateNetwork: PrivateNetworkConfig;
  keycloakAdminClientId: string;
  mailFrom: string;
  extraEnv: Partial<Record<DeployableName, Record<string, string>>>;
}

/** Non-secret environment of one deployable (the chart adds HOST, PORT, OTEL_* and upstream URLs). */
export function serviceEnvironment(
  d: Deployable,
  ctx: EnvironmentContext,
): Record<string, pulumi.Input<string>> {
  const env: Record<string, pulumi.Input<string>> = {};
  if (d.consumesQueue || d.publishesTo.length > 0) {
    env.QUEUE_NAME_PREFIX = ctx.queuePrefix;
    if (d.consumesQueue) env.QUEUE_NAME = serviceQueueName(d.name);
    for (const target of [...(d.consumesQueue ? [d.name] : []), ...d.publishesTo]) {
      const url = ctx.queueUrls[target];
      if (!url) throw new Error(`no queue for ${target} (needed by ${d.name})`);
      env[`${envPrefix(target)}_QUEUE_URL`] = url;
    }
  }
  if (d.name === "gateway") {
    env.APP_VERSION = ctx.imageTag;
    env.TRUST_PROXY = ctx.trustedProxyCidrs.join(",");
    env.GATEWAY_REPLICAS = String(ctx.gatewayReplicas);
    env.PORTAL_BEACON_ORIGINS = beaconOrigins(ctx.regions);
  }
  if (d.managesStreamingInstances) {
    Object.assign(env, {
      CLOUD_PROVIDER: "ec2",
      CLOUD_TAG_PREFIX: ctx.streaming.tagPrefix,
      CLOUD_AVAILABILITY_ZONE: ctx.streaming.availabilityZone,
      EC2_LAUNCH_TEMPLATE: ctx.streaming.launchTemplateId,
      EC2_SUBNET_ID: ctx.streaming.subnetId,
      REGIONS: regionsEnvironment(ctx.regions),
      STREAMING_HOST: "sunshine",
      ...privateNetworkEnvironment(ctx.privateNetwork),
      // The service finds the queue as QUEUE_NAME_PREFIX + this name, like its own inbound queue.
      HOST_REPORT_QUEUE_NAME: hostReportQueueName,
      HOST_ASSIGN_PORT: String(ctx.streaming.assignPort),
      ...capacityPoolsEnvironment(ctx.capacityPools),
    });
  }
  if (d.secrets.stripe) env.PAYMENT_PROVIDER = "stripe";
  if (d.secrets.identityProvider) env.KEYCLOAK_ADMIN_CLIENT_ID = ctx.keycloakAdminClientId;
  if (d.secrets.smtp) env.MAIL_FROM = ctx.mailFrom;
  return { ...env, ...(ctx.extraEnv[d.name] ?? {}) };
}

/** The sessions service's capacity pool settings (its config's POOL_* variables). */
export function capacityPoolsEnvironment(pools: CapacityPoolsConfig): Record<string, string> {
  return {
    POOL_HOT_MIN: String(pools.hot.min),
    POOL_HOT_MAX: String(pools.hot.max),
    POOL_HOT_COVER_MINUTES: String(pools.hot.coverMinutes),
    POOL_WARM_MIN: String(pools.warm.min),
    POOL_WARM_MAX: String(pools.warm.max),
    POOL_WARM_COVER_MINUTES: String(pools.warm.coverMinutes),
    POOL_SHRINK_AFTER_MINUTES: String(pools.shrinkAfterMinutes),
    POOL_LAUNCH_TIMEOUT_MINUTES: String(pools.launchTimeoutMinutes),
    POOL_RUNNING_HOUR_COST: String(pools.runningHourCost),
    POOL_STOPPED_HOUR_COST: String(pools.stoppedHourCost),
  };
}

/** Headscale as the chart runs it: its Service inside the cluster, its own public host for the nodes. */
export const HEADSCALE_PORT = 8080;

/** The sessions service's private-network settings (its API key comes from the streaming secret). */
export function privateNetworkEnvironment(net: PrivateNetworkConfig): Record<string, string> {
  return net.kind === "tailscale"
    ? { PRIVATE_NETWORK: "tailscale", TAILSCALE_TAILNET: net.tailnet, TAILSCALE_SLOTS: String(net.slots) }
    : {
        PRIVATE_NETWORK: "headscale",
        HEADSCALE_URL: `http://${RELEASE_NAME}-headscale.${NAMESPACE}.svc:${HEADSCALE_PORT}`,
        HEADSCALE_LOGIN_SERVER: `https://${net.host}`,
      };
}

/** Secrets Manager entries of one deployable: its database credentials plus the shared ones it uses. */
export function serviceSecrets(
  d: Deployable,
  sharedSecretArns: Record<SharedSecretName, pulumi.Input<string>>,
  databaseSecretArns: Partial<Record<DeployableName, pulumi.Input<string>>>,
  privateNetwork: PrivateNetworkConfig["kind"],
): SecretEntry[] {
  const entries: SecretEntry[] = [];
  const db = databaseSecretArns[d.name];
  if (d.database && db) entries.push({ secret: db, keys: { DATABASE_URL: "url" } });
  const apiKeyEnv = privateNetwork === "tailscale" ? "TAILSCALE_API_KEY" : "HEADSCALE_API_KEY";
  for (const [name, keys] of Object.entries(d.secrets) as [SharedSecretName, Record<string, string>][]) {
    const named = Object.fromEntries(
      Object.entries(keys).map(([env, key]) => [env === "PRIVATE_NETWORK_API_KEY" ? apiKeyEnv : env, key]),
    );
    entries.push({ secret: sharedSecretArns[name], keys: named });
  }
  return entries;
}

export interface PlatformValuesArgs {
  environment: string;
  region: string;
  imageRegistry: pulumi.Input<string>;
  imagePrefix: string;
  imageTag: string;
  domain: string;
  certificateArn: pulumi.Input<string>;
  dataCidrs: string[];
  loadBalancerCidrs: string[];
  /**
   * Ports the deployables that manage streaming instances call on them at their VPC addresses: Sunshine's API and
   * a pool instance's assignment endpoint (cgs:streaming.apiPort, assignPort). Their NetworkPolicy opens these.
   */
  streamingHostPorts: number[];
  workloads: WorkloadConfig;
  commonEnv: Record<string, pulumi.Input<string>>;
  env: Record<DeployableName, Record<string, pulumi.Input<string>>>;
  secrets: Record<DeployableName, SecretEntry[]>;
  roleArns: Record<DeployableName | "otel-collector" | "db-bootstrap", pulumi.Input<string>>;
  xrayTracing: boolean;
  database: {
    host: pulumi.Input<string>;
    port: pulumi.Input<number>;
    masterSecretArn: pulumi.Input<string>;
    databases: { service: string; database: string; passwordSecret: pulumi.Input<string> }[];
  };
  /** Self-hosted private network: the chart's headscale values; undefined for hosted Tailscale. */
  headscale?: {
    host: string;
    certificateArn: pulumi.Input<string>;
    roleArn: pulumi.Input<string>;
    database: { host: pulumi.Input<string>; port: pulumi.Input<number>; name: string; user: string };
    databaseSecret: pulumi.Input<string>;
    secret: pulumi.Input<string>;
    policy: string;
  };
}

function sizing(w: WorkloadConfig, replicas: number) {
  return {
    replicas,
    resources: { requests: w.requests, limits: w.limits },
    autoscaling: {
      enabled: true,
      minReplicas: replicas,
      maxReplicas: Math.max(replicas, w.maxReplicas),
      targetCPUUtilizationPercentage: w.targetCpuPercent,
    },
    pdb: { enabled: true, maxUnavailable: 1 },
  };
}

/** Values for charts/cgs-platform; every environment difference comes from the arguments. */
export function buildPlatformValues(a: PlatformValuesArgs): Record<string, unknown> {
  const services = Object.fromEntries(
    DEPLOYABLES.map((d) => [
      d.name,
      {
        port: d.port,
        ...sizing(a.workloads, a.workloads.replicas[d.name]),
        serviceAccount: { roleArn: a.roleArns[d.name] },
        env: a.env[d.name],
        secrets: a.secrets[d.name],
        fromLoadBalancer: d.name === "gateway",
        egress: {
          services: d.calls,
          postgres: d.database !== undefined,
          redis: d.secrets.redis !== undefined,
          internetPorts: [...d.internetPorts, ...(d.managesStreamingInstances ? a.streamingHostPorts : [])],
        },
      },
    ]),
  );
  return {
    environment: a.environment,
    image: { registry: a.imageRegistry, prefix: a.imagePrefix, tag: a.imageTag, pullPolicy: "IfNotPresent" },
    commonEnv: { NODE_ENV: "production", AWS_REGION: a.region, ...a.commonEnv },
    networkPolicy: { enabled: true, dataCidrs: a.dataCidrs, loadBalancerCidrs: a.loadBalancerCidrs },
    secretsStore: { enabled: true, provider: "aws" },
    ingress: { enabled: true, className: "alb", host: a.domain, certificateArn: a.certificateArn },
    services,
    otelCollector: {
      enabled: true,
      ...sizing(a.workloads, a.workloads.replicas["otel-collector"]),
      serviceAccount: { roleArn: a.roleArns["otel-collector"] },
      xray: a.xrayTracing,
      region: a.region,
    },
    databaseBootstrap: {
      enabled: true,
      host: a.database.host,
      port: a.database.port,
      serviceAccount: { roleArn: a.roleArns["db-bootstrap"] },
      masterSecret: a.database.masterSecretArn,
      databases: a.database.databases,
    },
    headscale: a.headscale
      ? {
          enabled: true,
          port: HEADSCALE_PORT,
          host: a.headscale.host,
          certificateArn: a.headscale.certificateArn,
          serviceAccount: { roleArn: a.headscale.roleArn },
          database: a.headscale.database,
          databaseSecret: a.headscale.databaseSecret,
          secret: a.headscale.secret,
          policy: a.headscale.policy,
        }
      : { enabled: false },
  };
}
