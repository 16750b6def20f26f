import * as path from "node:path";
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { AppSecrets } from "./components/app-secrets";
import { Cluster } from "./components/cluster";
import { ClusterAddons } from "./components/cluster-addons";
import { Database } from "./components/database";
import { FleetNetwork } from "./components/fleet-network";
import { ImageRegistry } from "./components/image-registry";
import { LatencyBeacons } from "./components/latency-beacon";
import { Network } from "./components/network";
import { PlatformAlarms } from "./components/platform-alarms";
import { PlatformRelease } from "./components/platform-release";
import { PublicEndpoint } from "./components/public-endpoint";
import { RateLimitCache } from "./components/rate-limit-cache";
import { ServiceAccountRole } from "./components/service-account-role";
import { ServiceQueue } from "./components/service-queue";
import { StreamingFleet } from "./components/streaming-fleet";
import { StreamingImage } from "./components/streaming-image";
import { STREAMING_IMAGE_DIR, hostAgentArtifacts } from "./streaming-image-sources";
import * as random from "@pulumi/random";
import { headscalePolicy, hostReportQueueName, tailnetPolicy } from "@cgs/shared";
import { loadPlatformConfig } from "./config";
import {
  NAMESPACE,
  RELEASE_NAME,
  type RegionEnvironment,
  buildPlatformValues,
  serviceAccountName,
  serviceEnvironment,
  serviceQueueName,
  serviceSecrets,
} from "./platform-values";
import { DEPLOYABLES, type DeployableName } from "./service-catalog";
import {
  allDeployableStatements,
  collectorStatements,
  databaseBootstrapStatements,
  headscaleStatements,
} from "./workload-policies";

const cfg = loadPlatformConfig();
const prefix = `cgs-${cfg.environment}`;
const tags = { Project: "cloud-gaming-platform", Environment: cfg.environment, ManagedBy: "pulumi" };
const accountId = aws.getCallerIdentityOutput().accountId;
const tagPrefix = prefix;
const queuePrefix = `${cfg.environment}-`;
const repoRoot = path.resolve(__dirname, "..", "..");
const byName = <T>(entries: [DeployableName, T][]) =>
  Object.fromEntries(entries) as Record<DeployableName, T>;

const network = new Network("network", {
  namePrefix: prefix,
  cidrBlock: cfg.vpcCidr,
  availabilityZones: cfg.availabilityZones,
  natGatewayPerAz: cfg.natGatewayPerAz,
  clusterName: prefix,
  tags,
});

const cluster = new Cluster("cluster", {
  name: prefix,
  region: cfg.region,
  kubernetesVersion: cfg.kubernetesVersion,
  vpcId: network.vpcId,
  privateSubnetIds: network.privateSubnetIds,
  publicSubnetIds: network.publicSubnetIds,
  nodeGroups: cfg.nodeGroups,
  tags,
});
const irsa = { oidcProviderArn: cluster.oidcProviderArn, oidcIssuerUrl: cluster.oidcIssuerUrl };

const addons = new ClusterAddons("addons", {
  clusterName: cluster.clusterName,
  region: cfg.region,
  accountId,
  vpcId: network.vpcId,
  clusterSecurityGroupId: cluster.clusterSecurityGroupId,
  roleNamePrefix: prefix,
  provider: cluster.provider,
  tags,
  ...irsa,
});

const registry = new ImageRegistry("images", {
  prefix,
  deployables: DEPLOYABLES.map((d) => d.name),
  keepImages: 50,
  tags,
});

const queues = Object.fromEntries(
  DEPLOYABLES.filter((d) => d.consumesQueue).map((d) => [
    d.name,
    new ServiceQueue(`queue-${d.name}`, {
      queueName: queuePrefix + serviceQueueName(d.name),
      ...cfg.queues,
      tags,
    }),
  ]),
) as Partial<Record<DeployableName, ServiceQueue>>;

// Reports from the host agents on the streaming instances; the sessions service consumes them.
const hostReportsQueueName = `${queuePrefix}${hostReportQueueName}`;
const hostReports = new ServiceQueue("queue-host-reports", {
  queueName: hostReportsQueueName,
  ...cfg.queues,
  tags,
});

const database = new Database("database", {
  identifier: prefix,
  ...cfg.database,
  vpcId: network.vpcId,
  subnetIds: network.privateSubnetIds,
  clientSecurityGroupIds: [cluster.clusterSecurityGroupId],
  databases: {
    ...Object.fromEntries(DEPLOYABLES.flatMap((d) => (d.database ? [[d.name, d.database]] : []))),
    // The self-hosted private network keeps its state in a database of its own on the same instance.
    ...(cfg.privateNetwork.kind === "headscale" ? { headscale: "headscale" } : {}),
  },
  secretPrefix: prefix,
  tags,
});

const cache = new RateLimitCache("rate-limits", {
  name: prefix,
  ...cfg.redis,
  vpcId: network.vpcId,
  subnetIds: network.privateSubnetIds,
  clientSecurityGroupIds: [cluster.clusterSecurityGroupId],
  secretPrefix: prefix,
  tags,
});

const alarms = new PlatformAlarms("alarms", {
  prefix,
  queues: {
    ...Object.fromEntries(
      DEPLOYABLES.filter((d) => d.consumesQueue).map((d) => {
        const queueName = queuePrefix + serviceQueueName(d.name);
        return [d.name, { queueName, dlqName: `${queueName}-dlq` }];
      }),
    ),
    "host-reports": { queueName: hostReportsQueueName, dlqName: `${hostReportsQueueName}-dlq` },
  },
  database: {
    identifier: prefix,
    instanceClass: cfg.database.instanceClass,
    allocatedStorageGiB: cfg.database.allocatedStorageGiB,
  },
  cache: { replicationGroupId: prefix, nodes: cfg.redis.nodes },
  tags,
});

const appSecrets = new AppSecrets("app-secrets", {
  prefix,
  stripeSecretKey: cfg.secrets.stripeSecretKey,
  stripeWebhookSecret: cfg.secrets.stripeWebhookSecret,
  keycloakAdminClientId: cfg.keycloakAdminClientId,
  keycloakAdminClientSecret: cfg.secrets.keycloakAdminClientSecret,
  smtpUrl: cfg.secrets.smtpUrl,
  privateNetworkApiKey: cfg.secrets.privateNetworkApiKey,
  tags,
});

// One streaming fleet per configured region. The home region's runs in the cluster's VPC; every other region's gets
// a VPC of its own peered with the cluster's (FleetNetwork) and an AWS provider of that region.
const remoteRegions = cfg.regions.filter((r) => !r.home);
const homeRegion = cfg.regions.find((r) => r.home)!;
const providers: Record<string, aws.Provider> = Object.fromEntries(
  remoteRegions.map((r) => [r.id, new aws.Provider(`aws-${r.id}`, { region: r.id as aws.Region })]),
);

// The stack builds the streaming image unless streaming.amiId names one to use instead; the build's distribution
// copies the AMI to every other fleet region.
const image = new StreamingImage("streaming-image", {
  prefix,
  region: cfg.region,
  copyToRegions: remoteRegions.map((r) => r.id),
  instanceType: cfg.streaming.instanceType,
  vpcId: network.vpcId,
  subnetId: network.privateSubnetIds[0] as pulumi.Output<string>,
  revision: cfg.streaming.imageRevision ?? 1,
  build: cfg.streaming.amiId === undefined,
  imageDir: STREAMING_IMAGE_DIR,
  hostAgent: hostAgentArtifacts(repoRoot),
  tags,
});
const imageIn = (region: (typeof cfg.regions)[number]): pulumi.Input<string> => {
  if (cfg.streaming.amiId !== undefined) return region.home ? cfg.streaming.amiId : region.amiId!;
  return image.amiIds!.apply((ids) => ids[region.id]!);
};
const streamingImageId = imageIn(homeRegion);

const fleet = new StreamingFleet("streaming", {
  name: prefix,
  vpcId: network.vpcId,
  apiClients: { securityGroupIds: [cluster.clusterSecurityGroupId] },
  tagPrefix,
  ...cfg.streaming,
  imageId: streamingImageId,
  hostReportsQueueArn: hostReports.arn,
  tags,
});
const homeSubnetId = network.publicSubnetIds[
  cfg.availabilityZones.indexOf(homeRegion.availabilityZone)
] as pulumi.Output<string>;

const fleets = cfg.regions.map((region) => {
  if (region.home) {
    return {
      region,
      fleet,
      subnetId: homeSubnetId,
      subnetIds: network.publicSubnetIds,
      amiId: streamingImageId,
    };
  }
  const fleetNetwork = new FleetNetwork(`fleet-network-${region.id}`, {
    namePrefix: prefix,
    region: region.id,
    cidrBlock: region.cidr!,
    availabilityZone: region.availabilityZone,
    cluster: {
      vpcId: network.vpcId,
      vpcCidr: network.vpcCidr,
      privateRouteTableIds: network.privateRouteTableIds,
    },
    provider: providers[region.id]!,
    tags,
  });
  const amiId = imageIn(region);
  const regional = new StreamingFleet(
    `streaming-${region.id}`,
    {
      name: prefix,
      vpcId: fleetNetwork.vpcId,
      // Security groups cannot be referenced across regions: the cluster's private subnets, where the pods run.
      apiClients: { cidrBlocks: network.privateSubnetCidrs },
      hostProfile: { arn: fleet.hostProfileArn, roleArn: fleet.hostRoleArn },
      tagPrefix,
      ...cfg.streaming,
      imageId: amiId,
      hostReportsQueueArn: hostReports.arn,
      tags,
    },
    { providers: [providers[region.id]!] },
  );
  return {
    region,
    fleet: regional,
    subnetId: fleetNetwork.subnetId,
    subnetIds: [fleetNetwork.subnetId],
    amiId,
    peeringConnectionId: fleetNetwork.peeringConnectionId,
  };
});

const beacons = new LatencyBeacons("latency-beacon", {
  namePrefix: prefix,
  regions: cfg.regions.map((r) => ({ id: r.id, provider: providers[r.id] })),
  tags,
});

const regionsEnv: RegionEnvironment[] = fleets.map((f) => ({
  id: f.region.id,
  name: f.region.name,
  beaconUrl: beacons.urls[f.region.id]!,
  availabilityZone: f.region.availabilityZone,
  ec2: {
    launchTemplate: f.fleet.launchTemplateId,
    subnetId: f.subnetId,
    securityGroupIds: [f.fleet.securityGroupId],
  },
}));

const queueArns = Object.fromEntries(Object.entries(queues).map(([n, q]) => [n, q.arn]));
const queueUrls = Object.fromEntries(Object.entries(queues).map(([n, q]) => [n, q.url]));
const sharedSecretArns = {
  stripe: appSecrets.stripeArn,
  identityProvider: appSecrets.identityProviderArn,
  smtp: appSecrets.smtpArn,
  redis: cache.secretArn,
  streaming: appSecrets.streamingArn,
};
const databaseSecretArns = Object.fromEntries(
  Object.entries(database.credentials).map(([n, c]) => [n, c.secretArn]),
) as Partial<Record<DeployableName, pulumi.Output<string>>>;
const streaming = {
  fleets: fleets.map((f) => ({
    region: f.region.id,
    launchTemplateArn: f.fleet.launchTemplateArn,
    securityGroupArn: f.fleet.securityGroupArn,
    subnetIds: f.subnetIds,
    amiId: f.amiId,
  })),
  hostRoleArn: fleet.hostRoleArn,
  tagPrefix,
};

const statements = allDeployableStatements({
  region: cfg.region,
  accountId,
  queueArns,
  hostReportsQueueArn: hostReports.arn,
  sharedSecretArns,
  databaseSecretArns,
  streaming,
});
const role = (workload: string, s: ReturnType<typeof collectorStatements>) =>
  new ServiceAccountRole(`role-${workload}`, {
    roleName: `${prefix}-${workload}`,
    namespace: NAMESPACE,
    serviceAccount: serviceAccountName(workload),
    statements: s,
    tags,
    ...irsa,
  });
const serviceRoles = byName(DEPLOYABLES.map((d) => [d.name, role(d.name, statements[d.name])]));
const collectorRole = role("otel-collector", collectorStatements());
const bootstrapRole = role(
  "db-bootstrap",
  databaseBootstrapStatements(
    database.masterSecretArn,
    Object.values(databaseSecretArns) as pulumi.Output<string>[],
  ),
);

const endpoint = new PublicEndpoint("public-endpoint", {
  domain: cfg.domain,
  route53ZoneId: cfg.route53ZoneId,
  tags,
});

// Self-hosted private network: Headscale in the cluster on its own database, with a noise key generated once
// (nodes stay registered across restarts), a role that reads only its two secrets, and its own certificate.
const net = cfg.privateNetwork;
const headscale = net.kind === "headscale" ? selfHostedHeadscale(net.host) : undefined;

function selfHostedHeadscale(host: string) {
  const noiseKey = new random.RandomBytes("headscale-noise-key", { length: 32 });
  const secret = new aws.secretsmanager.Secret("headscale", {
    name: `${prefix}/headscale`,
    description: "Headscale's noise private key (the control plane's identity towards every node)",
    recoveryWindowInDays: 7,
    tags,
  });
  new aws.secretsmanager.SecretVersion("headscale", {
    secretId: secret.id,
    secretString: pulumi.secret(
      pulumi.jsonStringify({ noisePrivateKey: pulumi.interpolate`privkey:${noiseKey.hex}` }),
    ),
  });
  const databaseSecret = database.credentials.headscale!.secretArn;
  const role = new ServiceAccountRole("role-headscale", {
    roleName: `${prefix}-headscale`,
    namespace: NAMESPACE,
    serviceAccount: serviceAccountName("headscale"),
    statements: headscaleStatements(secret.arn, databaseSecret),
    tags,
    ...irsa,
  });
  const certificate = new PublicEndpoint("headscale-endpoint", {
    domain: host,
    route53ZoneId: cfg.route53ZoneId,
    tags,
  });
  return {
    host,
    certificateArn: certificate.certificateArn,
    roleArn: role.roleArn,
    database: { host: database.address, port: database.port, name: "headscale", user: "headscale" },
    databaseSecret,
    secret: secret.arn,
    policy: JSON.stringify(
      headscalePolicy({ tcpPorts: cfg.streaming.tcpPorts, udpPortRange: cfg.streaming.udpPortRange }),
    ),
  };
}

const platform = new PlatformRelease("platform", {
  chartPath: path.resolve(__dirname, "..", "..", "charts", "cgs-platform"),
  releaseName: RELEASE_NAME,
  namespace: NAMESPACE,
  provider: cluster.provider,
  dependsOn: addons.ready,
  values: buildPlatformValues({
    environment: cfg.environment,
    region: cfg.region,
    imageRegistry: registry.registry,
    imagePrefix: prefix,
    imageTag: cfg.imageTag,
    domain: cfg.domain,
    certificateArn: endpoint.certificateArn,
    dataCidrs: network.privateSubnetCidrs,
    loadBalancerCidrs: network.publicSubnetCidrs,
    streamingHostPorts: [cfg.streaming.apiPort, cfg.streaming.assignPort],
    workloads: cfg.workloads,
    commonEnv: {
      OIDC_ISSUER: cfg.oidcIssuer,
      OIDC_AUDIENCE: cfg.oidcAudience,
      PUBLIC_BASE_URL: `https://${cfg.domain}`,
    },
    env: byName(
      DEPLOYABLES.map((d) => [
        d.name,
        serviceEnvironment(d, {
          queuePrefix,
          queueUrls,
          imageTag: cfg.imageTag,
          trustedProxyCidrs: network.publicSubnetCidrs,
          gatewayReplicas: cfg.workloads.replicas.gateway,
          regions: regionsEnv,
          streaming: {
            launchTemplateId: fleet.launchTemplateId,
            subnetId: homeSubnetId,
            availabilityZone: homeRegion.availabilityZone,
            tagPrefix,
            assignPort: cfg.streaming.assignPort,
          },
          capacityPools: cfg.capacityPools,
          privateNetwork: cfg.privateNetwork,
          keycloakAdminClientId: cfg.keycloakAdminClientId,
          mailFrom: cfg.mailFrom,
          extraEnv: cfg.extraEnv,
        }),
      ]),
    ),
    secrets: byName(
      DEPLOYABLES.map((d) => [
        d.name,
        serviceSecrets(d, sharedSecretArns, databaseSecretArns, cfg.privateNetwork.kind),
      ]),
    ),
    roleArns: {
      ...byName(DEPLOYABLES.map((d) => [d.name, serviceRoles[d.name].roleArn])),
      "otel-collector": collectorRole.roleArn,
      "db-bootstrap": bootstrapRole.roleArn,
    },
    xrayTracing: cfg.xrayTracing,
    database: {
      host: database.address,
      port: database.port,
      masterSecretArn: database.masterSecretArn,
      databases: Object.entries(database.credentials).map(([service, c]) => ({
        service,
        database: c.database,
        passwordSecret: c.secretArn,
      })),
    },
    headscale,
  }),
});

export const vpcId = network.vpcId;
export const clusterName = cluster.clusterName;
export const kubeconfig = pulumi.secret(cluster.kubeconfig);
export const imageRegistry = registry.registry;
export const repositoryUrls = registry.repositoryUrls;
export const databaseAddress = database.address;
export const alarmTopicArn = alarms.topicArn;
export const redisEndpoint = cache.primaryEndpoint;
export const queueUrlsByService = queueUrls;
export const deadLetterQueueUrls = Object.fromEntries(Object.entries(queues).map(([n, q]) => [n, q.dlqUrl]));
export const serviceRoleArns = Object.fromEntries(
  Object.entries(serviceRoles).map(([n, r]) => [n, r.roleArn]),
);
export const streamingLaunchTemplateId = fleet.launchTemplateId;
/** Every fleet region as built: what the sessions service's REGIONS is made of, plus the peering to the cluster. */
export const streamingRegions = Object.fromEntries(
  fleets.map((f) => [
    f.region.id,
    {
      name: f.region.name,
      availabilityZone: f.region.availabilityZone,
      launchTemplateId: f.fleet.launchTemplateId,
      subnetId: f.subnetId,
      securityGroupId: f.fleet.securityGroupId,
      amiId: f.amiId,
      beaconUrl: beacons.urls[f.region.id],
      vpcPeeringConnectionId: f.peeringConnectionId,
    },
  ]),
);
export const streamingAmiId = streamingImageId;
export const streamingImagePipelineArn = image.pipelineArn;
export const hostReportsQueueUrl = hostReports.url;
export const certificateArn = endpoint.certificateArn;
export const ingressHostname = platform.ingressHostname;
export const url = `https://${cfg.domain}`;
// The private network's fixed policy: hosted Tailscale's (a pool of `slots` slot tags; apply it to the tailnet
// once, its size never grows with the accounts) or the one the chart hands Headscale. The other one is undefined.
export const tailnetAclPolicy =
  net.kind === "tailscale"
    ? JSON.stringify(
        tailnetPolicy({
          sessionsTag: "tag:cgs-sessions",
          clientTag: "tag:cgs-client",
          hostTag: "tag:cgs-host",
          slots: net.slots,
          tcpPorts: cfg.streaming.tcpPorts,
          udpPortRange: cfg.streaming.udpPortRange,
        }),
      )
    : undefined;
export const headscaleAclPolicy = headscale?.policy;
/** Where devices and hosts log in (`tailscale up --login-server`); undefined for hosted Tailscale. */
export const privateNetworkLoginServer = headscale ? `https://${headscale.host}` : undefined;
