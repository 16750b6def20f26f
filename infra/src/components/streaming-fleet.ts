import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import type { StreamingConfig } from "../config";
import { fail, integerIn, ipv4Cidr, matching, nonEmptyList, PORT_MAX, unique } from "../config-checks";
import { policyJson, servicePrincipalTrustPolicy } from "../iam-policy";
import { streamingHostStatements } from "../workload-policies";

export interface StreamingFleetArgs extends StreamingConfig {
  name: string;
  vpcId: pulumi.Input<string>;
  /**
   * What runs the sessions service, the only source of the API and assignment ports: the cluster's security groups
   * (a fleet in the cluster's VPC) or, for a fleet in another region's VPC reached through peering, where security
   * groups cannot be referenced, the CIDRs of the cluster's private subnets. Exactly one of the two.
   */
  apiClients: { securityGroupIds: pulumi.Input<string>[] } | { cidrBlocks: string[] };
  /**
   * The streaming host role and instance profile made by another fleet (IAM is global: one role serves every
   * region); unset, this fleet makes them.
   */
  hostProfile?: { arn: pulumi.Input<string>; roleArn: pulumi.Input<string> };
  /** CLOUD_TAG_PREFIX of the sessions service; instances and volumes carry <prefix>:* tags. */
  tagPrefix: string;
  /** The AMI instances start from: the image the stack built, or `streaming.amiId` when set. */
  imageId: pulumi.Input<string>;
  /** Where the host agent sends its reports: the only thing the instances' role may do. */
  hostReportsQueueArn: pulumi.Input<string>;
  tags: Record<string, string>;
}

const OPEN_TO_ALL = new Set(["0.0.0.0/0", "::/0"]);

function validateStreaming(args: StreamingFleetArgs): void {
  for (const cidr of args.privateNetworkCidrs) ipv4Cidr("cgs:streaming.privateNetworkCidrs", cidr, 8, 32);
  for (const port of nonEmptyList<number>("cgs:streaming.tcpPorts", args.tcpPorts)) {
    integerIn("cgs:streaming.tcpPorts", port, 1, PORT_MAX);
  }
  unique("cgs:streaming.tcpPorts", args.tcpPorts);
  const udp = args.udpPortRange ?? {};
  integerIn("cgs:streaming.udpPortRange.from", udp.from, 1, PORT_MAX);
  integerIn("cgs:streaming.udpPortRange.to", udp.to, udp.from, PORT_MAX);
  integerIn("cgs:streaming.apiPort", args.apiPort, 1, PORT_MAX);
  integerIn("cgs:streaming.assignPort", args.assignPort, 1, PORT_MAX);
  // The host API and the assignment endpoint take the sessions service's calls only; a streaming port of the same
  // number would open them to players.
  for (const key of ["apiPort", "assignPort"] as const) {
    if (args.tcpPorts.includes(args[key])) {
      fail(
        `cgs:streaming.${key} ${args[key]} is also in cgs:streaming.tcpPorts, which the private network reaches`,
      );
    }
  }
  if (args.assignPort === args.apiPort) {
    fail(
      `cgs:streaming.assignPort ${args.assignPort} is cgs:streaming.apiPort too: Sunshine's API listens there`,
    );
  }
  // Optional: the stack's own image is used unless an AMI overrides it.
  if (args.amiId !== undefined) {
    matching(
      "cgs:streaming.amiId",
      args.amiId,
      /^ami-[0-9a-f]{8,17}$/,
      "an AMI id such as ami-0123456789abcdef0",
    );
  }
  matching(
    "cgs:streaming.instanceType",
    args.instanceType,
    /^[a-z][a-z0-9-]*\.[a-z0-9]+$/,
    "an EC2 instance type",
  );
  integerIn("cgs:streaming.volumeSizeGiB", args.volumeSizeGiB, 1, 16_384);
  matching(
    "cgs:streaming.rootDeviceName",
    args.rootDeviceName,
    /^\/dev\/[a-z0-9]+$/,
    "a device such as /dev/sda1",
  );
}

/**
 * Launch template, security group and instance profile of the streaming instances the sessions service starts.
 * The streaming ports admit only the private network; the host API and a pool instance's assignment endpoint admit
 * only the sessions service's security groups; the instances' role may only send host reports. A new image becomes the template's new default version:
 * instances already running keep the image they started from.
 */
export class StreamingFleet extends pulumi.ComponentResource {
  readonly launchTemplateId: pulumi.Output<string>;
  readonly launchTemplateArn: pulumi.Output<string>;
  readonly securityGroupId: pulumi.Output<string>;
  readonly securityGroupArn: pulumi.Output<string>;
  readonly hostRoleArn: pulumi.Output<string>;
  readonly hostProfileArn: pulumi.Output<string>;

  constructor(name: string, args: StreamingFleetArgs, opts?: pulumi.ComponentResourceOptions) {
    super("cgs:infra:StreamingFleet", name, {}, opts);
    const open = args.privateNetworkCidrs.filter((c) => OPEN_TO_ALL.has(c));
    if (open.length > 0 || args.privateNetworkCidrs.length === 0) {
      throw new Error(
        `streaming.privateNetworkCidrs must name the private network's range, never ${open.join(", ") || "nothing"}`,
      );
    }
    validateStreaming(args);
    const apiSources =
      "securityGroupIds" in args.apiClients
        ? { securityGroups: args.apiClients.securityGroupIds }
        : { cidrBlocks: args.apiClients.cidrBlocks };
    for (const cidr of apiSources.cidrBlocks ?? []) {
      if (OPEN_TO_ALL.has(cidr)) fail(`the streaming host API can never be opened to ${cidr}`);
      ipv4Cidr("the sessions service's CIDRs", cidr, 8, 32);
    }
    const ownTags = { ...args.tags, [`${args.tagPrefix}:managed-by`]: "sessions" };
    const sg = new aws.ec2.SecurityGroup(
      `${name}-sg`,
      {
        vpcId: args.vpcId,
        description: "Streaming instances: private-network player traffic and the sessions API in",
        ingress: [
          ...args.tcpPorts.map((port) => ({
            protocol: "tcp",
            fromPort: port,
            toPort: port,
            cidrBlocks: args.privateNetworkCidrs,
            description: "streaming control, private network only",
          })),
          {
            protocol: "udp",
            fromPort: args.udpPortRange.from,
            toPort: args.udpPortRange.to,
            cidrBlocks: args.privateNetworkCidrs,
            description: "streaming media, private network only",
          },
          {
            protocol: "tcp",
            fromPort: args.apiPort,
            toPort: args.apiPort,
            ...apiSources,
            description: "streaming host API, sessions service only",
          },
          {
            protocol: "tcp",
            fromPort: args.assignPort,
            toPort: args.assignPort,
            ...apiSources,
            description: "pool instance assignment, sessions service only",
          },
        ],
        egress: [{ protocol: "-1", fromPort: 0, toPort: 0, cidrBlocks: ["0.0.0.0/0"], description: "all" }],
        tags: { ...args.tags, Name: `${args.name}-streaming` },
      },
      { parent: this },
    );
    const hostProfile = args.hostProfile ?? this.hostRoleAndProfile(name, args);
    const template = new aws.ec2.LaunchTemplate(
      name,
      {
        name: `${args.name}-streaming`,
        imageId: args.imageId,
        instanceType: args.instanceType,
        iamInstanceProfile: { arn: hostProfile.arn },
        vpcSecurityGroupIds: [sg.id],
        instanceInitiatedShutdownBehavior: "terminate",
        metadataOptions: { httpEndpoint: "enabled", httpTokens: "required", httpPutResponseHopLimit: 1 },
        blockDeviceMappings: [
          {
            deviceName: args.rootDeviceName,
            ebs: {
              volumeSize: args.volumeSizeGiB,
              volumeType: "gp3",
              encrypted: "true",
              deleteOnTermination: "true",
            },
          },
        ],
        tagSpecifications: [
          { resourceType: "instance", tags: ownTags },
          { resourceType: "volume", tags: ownTags },
        ],
        updateDefaultVersion: true,
        tags: args.tags,
      },
      { parent: this },
    );
    this.launchTemplateId = template.id;
    this.launchTemplateArn = template.arn;
    this.securityGroupId = sg.id;
    this.securityGroupArn = sg.arn;
    this.hostRoleArn = pulumi.output(hostProfile.roleArn);
    this.hostProfileArn = pulumi.output(hostProfile.arn);
    this.registerOutputs({ launchTemplateId: this.launchTemplateId, securityGroupId: this.securityGroupId });
  }

  private hostRoleAndProfile(name: string, args: StreamingFleetArgs) {
    const hostRole = new aws.iam.Role(
      `${name}-host`,
      {
        name: `${args.name}-streaming-host`,
        assumeRolePolicy: servicePrincipalTrustPolicy("ec2.amazonaws.com"),
        maxSessionDuration: 3600,
        tags: args.tags,
      },
      { parent: this },
    );
    new aws.iam.RolePolicy(
      `${name}-host`,
      { role: hostRole.id, policy: policyJson(streamingHostStatements(args.hostReportsQueueArn)) },
      { parent: this },
    );
    const profile = new aws.iam.InstanceProfile(
      `${name}-host`,
      { name: `${args.name}-streaming-host`, role: hostRole.name, tags: args.tags },
      { parent: this },
    );
    return { arn: profile.arn, roleArn: hostRole.arn };
  }
}
