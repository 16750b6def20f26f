import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import type { StreamingConfig } from "../config";

export interface StreamingFleetArgs extends StreamingConfig {
  name: string;
  vpcId: pulumi.Input<string>;
  vpcCidr: string;
  /** CLOUD_TAG_PREFIX of the sessions service; instances and volumes carry <prefix>:* tags. */
  tagPrefix: string;
  tags: Record<string, string>;
}

/** Launch template and security group for the streaming instances the sessions service starts. */
export class StreamingFleet extends pulumi.ComponentResource {
  readonly launchTemplateId: pulumi.Output<string>;
  readonly launchTemplateArn: pulumi.Output<string>;
  readonly securityGroupId: pulumi.Output<string>;
  readonly securityGroupArn: pulumi.Output<string>;

  constructor(name: string, args: StreamingFleetArgs, opts?: pulumi.ComponentResourceOptions) {
    super("cgs:infra:StreamingFleet", name, {}, opts);
    const ownTags = { ...args.tags, [`${args.tagPrefix}:managed-by`]: "sessions" };
    const sg = new aws.ec2.SecurityGroup(
      `${name}-sg`,
      {
        vpcId: args.vpcId,
        description: "Streaming instances: player traffic in, anything out",
        ingress: [
          ...args.tcpPorts.map((port) => ({
            protocol: "tcp",
            fromPort: port,
            toPort: port,
            cidrBlocks: args.clientCidrs,
            description: "streaming control",
          })),
          {
            protocol: "udp",
            fromPort: args.udpPortRange.from,
            toPort: args.udpPortRange.to,
            cidrBlocks: args.clientCidrs,
            description: "streaming media",
          },
          {
            protocol: "tcp",
            fromPort: args.apiPort,
            toPort: args.apiPort,
            cidrBlocks: [args.vpcCidr],
            description: "streaming host API, sessions service only",
          },
        ],
        egress: [{ protocol: "-1", fromPort: 0, toPort: 0, cidrBlocks: ["0.0.0.0/0"], description: "all" }],
        tags: { ...args.tags, Name: `${args.name}-streaming` },
      },
      { parent: this },
    );
    const template = new aws.ec2.LaunchTemplate(
      name,
      {
        name: `${args.name}-streaming`,
        imageId: args.amiId,
        instanceType: args.instanceType,
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
    this.registerOutputs({ launchTemplateId: this.launchTemplateId, securityGroupId: this.securityGroupId });
  }
}
