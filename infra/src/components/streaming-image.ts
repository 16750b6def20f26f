import * as fs from "node:fs";
import * as path from "node:path";
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { policyJson, servicePrincipalTrustPolicy } from "../iam-policy";
import { contentHash, contentVersion, type HostAgentArtifacts } from "../streaming-image-sources";
import { GPU_FAMILIES, STREAMING_IMAGE_PINS, gpuFamilyOf } from "../streaming-image-versions";
import { imageBuildStatements } from "../workload-policies";

export interface StreamingImageArgs {
  /** Name prefix of every resource (cgs-<environment>). */
  prefix: string;
  region: string;
  /**
   * The other regions with a streaming fleet: the distribution copies each built AMI to them, so one build serves
   * every region and all run the same image.
   */
  copyToRegions?: string[];
  /** The fleet's instance type: the build runs on the same GPU family, so the driver is built and tested on it. */
  instanceType: string;
  vpcId: pulumi.Input<string>;
  /** A private subnet with a NAT route: the build downloads packages but is never reachable from outside. */
  subnetId: pulumi.Input<string>;
  /** Bump to rebuild with the current Ubuntu packages and driver when nothing in the repository changed. */
  revision: number;
  /** False when `streaming.amiId` overrides the built image: the recipe and pipeline stay, nothing is built. */
  build: boolean;
  /** infra/streaming-image. */
  imageDir: string;
  hostAgent: HostAgentArtifacts;
  tags: Record<string, string>;
}

/** The component documents of infra/streaming-image/components, in the order the recipe runs them. */
export const COMPONENT_FILES = [
  "streaming-base.yaml",
  "nvidia-gaming-driver.yaml",
  "sunshine.yaml",
  "tailscale.yaml",
  "streaming-host.yaml",
] as const;

const ROOT_VOLUME_GIB = 30;

/**
 * The streaming hosts' image, built by EC2 Image Builder from this repository: Ubuntu 24.04 LTS, AWS's NVIDIA gaming
 * driver for the fleet's GPU family, Sunshine and Tailscale at pinned versions, Node.js 24 and the host agent, and
 * the boot units. `pulumi up` builds it (an `aws.imagebuilder.Image`) whenever a document, a file, a pin or the
 * revision changes, and its AMI id feeds the launch template; the pipeline rebuilds the same recipe on demand.
 */
export class StreamingImage extends pulumi.ComponentResource {
  /** The AMI the build produced, in the home region; undefined when `build` is false. */
  readonly amiId?: pulumi.Output<string>;
  /** The built AMI's id in every region it was distributed to (home and copies); undefined when `build` is false. */
  readonly amiIds?: pulumi.Output<Record<string, string>>;
  readonly recipeArn: pulumi.Output<string>;
  readonly pipelineArn: pulumi.Output<string>;
  readonly inputsBucket: pulumi.Output<string>;
  readonly buildRoleName: pulumi.Output<string>;

  constructor(name: string, args: StreamingImageArgs, opts?: pulumi.ComponentResourceOptions) {
    super("cgs:infra:StreamingImage", name, {}, opts);
    const family = GPU_FAMILIES[gpuFamilyOf(args.instanceType)];
    if (!family) {
      throw new Error(
        `streaming.instanceType ${args.instanceType} is not of a GPU family the image supports (${Object.keys(GPU_FAMILIES).join(", ")})`,
      );
    }
    const child = { parent: this };
    const pins = STREAMING_IMAGE_PINS;

    // Build inputs, content-addressed so a changed file gets a new key and so a new component version.
    const bucket = new aws.s3.Bucket(
      `${name}-inputs`,
      { bucketPrefix: `${args.prefix}-image-inputs-`, forceDestroy: true, tags: args.tags },
      child,
    );
    new aws.s3.BucketPublicAccessBlock(
      `${name}-inputs`,
      {
        bucket: bucket.id,
        blockPublicAcls: true,
        blockPublicPolicy: true,
        ignorePublicAcls: true,
        restrictPublicBuckets: true,
      },
      child,
    );
    const filesHash = contentHash({
      base: args.imageDir,
      paths: [path.join(args.imageDir, "build"), path.join(args.imageDir, "rootfs")],
    }).slice(0, 16);
    const agentHash = contentHash({
      base: path.dirname(args.hostAgent.bundle),
      paths: [args.hostAgent.bundle, args.hostAgent.unit],
    }).slice(0, 16);
    const object = (id: string, key: string, source: pulumi.asset.Asset | pulumi.asset.Archive) =>
      new aws.s3.BucketObjectv2(`${name}-${id}`, { bucket: bucket.id, key, source, tags: args.tags }, child);
    const filesKey = `image-files/${filesHash}.zip`;
    const bundleKey = `host-agent/${agentHash}/cgs-host-agent.cjs`;
    const unitKey = `host-agent/${agentHash}/cgs-host-agent.service`;
    const uploads = [
      object(
        "files",
        filesKey,
        new pulumi.asset.AssetArchive({
          build: new pulumi.asset.FileArchive(path.join(args.imageDir, "build")),
          rootfs: new pulumi.asset.FileArchive(path.join(args.imageDir, "rootfs")),
        }),
      ),
      object("agent-bundle", bundleKey, new pulumi.asset.FileAsset(args.hostAgent.bundle)),
      object("agent-unit", unitKey, new pulumi.asset.FileAsset(args.hostAgent.unit)),
    ];
    const s3Uri = (key: string) => pulumi.interpolate`s3://${bucket.bucket}/${key}`;

    // The build instance: Image Builder's and Systems Manager's managed policies, plus reading the inputs above.
    const role = new aws.iam.Role(
      `${name}-build`,
      {
        name: `${args.prefix}-image-build`,
        assumeRolePolicy: servicePrincipalTrustPolicy("ec2.amazonaws.com"),
        tags: args.tags,
      },
      child,
    );
    for (const policy of ["EC2InstanceProfileForImageBuilder", "AmazonSSMManagedInstanceCore"]) {
      new aws.iam.RolePolicyAttachment(
        `${name}-build-${policy}`,
        { role: role.name, policyArn: `arn:aws:iam::aws:policy/${policy}` },
        child,
      );
    }
    new aws.iam.RolePolicy(
      `${name}-build`,
      { role: role.id, policy: policyJson(imageBuildStatements(bucket.arn)) },
      child,
    );
    const profile = new aws.iam.InstanceProfile(
      `${name}-build`,
      { name: `${args.prefix}-image-build`, role: role.name, tags: args.tags },
      child,
    );
    const sg = new aws.ec2.SecurityGroup(
      `${name}-build`,
      {
        vpcId: args.vpcId,
        description: "Streaming image build: package and S3 downloads out, nothing in",
        ingress: [],
        egress: [80, 443].map((port) => ({
          protocol: "tcp",
          fromPort: port,
          toPort: port,
          cidrBlocks: ["0.0.0.0/0"],
          description:
            port === 80 ? "Ubuntu archive (signed packages)" : "HTTPS: S3, SSM, package repositories",
        })),
        tags: { ...args.tags, Name: `${args.prefix}-image-build` },
      },
      child,
    );

    const componentData = COMPONENT_FILES.map((file) => ({
      file,
      data: fs.readFileSync(path.join(args.imageDir, "components", file), "utf8"),
    }));
    const components = Object.fromEntries(
      componentData.map(({ file, data }) => {
        const id = file.replace(/\.yaml$/, "");
        const component = new aws.imagebuilder.Component(
          `${name}-${id}`,
          {
            name: `${args.prefix}-${id}`,
            version: contentVersion(data),
            platform: "Linux",
            data,
            tags: args.tags,
          },
          child,
        );
        return [id, component];
      }),
    ) as Record<string, aws.imagebuilder.Component>;
    const use = (id: string, parameters: Record<string, pulumi.Input<string>>) => ({
      componentArn: components[id]!.arn,
      parameters: Object.entries(parameters).map(([n, value]) => ({ name: n, value })),
    });
    const recipeComponents = [
      use("streaming-base", { ImageFilesS3Uri: s3Uri(filesKey) }),
      use("nvidia-gaming-driver", {
        DriverS3Prefix: pins.nvidiaGamingDriverPrefix,
        DisableGsp: String(family.disableGsp),
        GpuName: family.gpu,
      }),
      use("sunshine", {
        SunshineVersion: pins.sunshine.version,
        SunshineUrl: pins.sunshine.url,
        SunshineSha256: pins.sunshine.sha256,
      }),
      use("tailscale", {
        TailscaleVersion: pins.tailscale.version,
        TailscaleKeyFingerprint: pins.tailscale.aptKeyFingerprint,
      }),
      use("streaming-host", {
        HostAgentS3Uri: s3Uri(bundleKey),
        HostAgentUnitS3Uri: s3Uri(unitKey),
        NodeVersion: pins.node.version,
        NodeAptVersion: pins.node.aptVersion,
        NodeSourceKeyFingerprint: pins.node.aptKeyFingerprint,
        GpuName: family.gpu,
        SunshineVersion: pins.sunshine.version,
        TailscaleVersion: pins.tailscale.version,
      }),
    ];
    const recipe = new aws.imagebuilder.ImageRecipe(
      name,
      {
        name: `${args.prefix}-streaming`,
        // Everything the build depends on: documents, files, agent, pins, family and the revision.
        version: contentVersion(
          ...componentData.map((c) => c.data),
          filesHash,
          agentHash,
          JSON.stringify(pins),
          JSON.stringify(family),
          String(args.revision),
        ),
        parentImage: pins.parentImage,
        components: recipeComponents,
        blockDeviceMappings: [
          {
            deviceName: "/dev/sda1",
            ebs: {
              volumeSize: ROOT_VOLUME_GIB,
              volumeType: "gp3",
              encrypted: "true",
              deleteOnTermination: "true",
            },
          },
        ],
        tags: args.tags,
      },
      child,
    );
    const infrastructure = new aws.imagebuilder.InfrastructureConfiguration(
      name,
      {
        name: `${args.prefix}-streaming-build`,
        description: "GPU build instance in a private subnet, IMDSv2 only, no key pair",
        instanceTypes: [args.instanceType],
        instanceProfileName: profile.name,
        subnetId: args.subnetId,
        securityGroupIds: [sg.id],
        terminateInstanceOnFailure: true,
        instanceMetadataOptions: { httpTokens: "required", httpPutResponseHopLimit: 1 },
        resourceTags: args.tags,
        tags: args.tags,
      },
      child,
    );
    const distribution = new aws.imagebuilder.DistributionConfiguration(
      name,
      {
        name: `${args.prefix}-streaming`,
        distributions: [args.region, ...(args.copyToRegions ?? [])].map((region) => ({
          region,
          amiDistributionConfiguration: {
            name: `${args.prefix}-streaming-{{imagebuilder:buildDate}}`,
            description:
              "Cloud-gaming streaming host: Ubuntu 24.04, NVIDIA gaming driver, Sunshine, Tailscale",
            amiTags: {
              ...args.tags,
              "cgs:gpu-family": gpuFamilyOf(args.instanceType),
              "cgs:sunshine": pins.sunshine.version,
              "cgs:tailscale": pins.tailscale.version,
            },
          },
        })),
        tags: args.tags,
      },
      child,
    );
    const imageTests = { imageTestsEnabled: true, timeoutMinutes: 60 };
    const pipeline = new aws.imagebuilder.ImagePipeline(
      name,
      {
        name: `${args.prefix}-streaming`,
        description: "Rebuilds the streaming image from the current recipe when started (no schedule)",
        imageRecipeArn: recipe.arn,
        infrastructureConfigurationArn: infrastructure.arn,
        distributionConfigurationArn: distribution.arn,
        imageTestsConfiguration: imageTests,
        status: "ENABLED",
        tags: args.tags,
      },
      child,
    );
    if (args.build) {
      const image = new aws.imagebuilder.Image(
        name,
        {
          imageRecipeArn: recipe.arn,
          infrastructureConfigurationArn: infrastructure.arn,
          distributionConfigurationArn: distribution.arn,
          imageTestsConfiguration: imageTests,
          tags: args.tags,
        },
        { ...child, dependsOn: uploads, customTimeouts: { create: "150m" } },
      );
      const regions = [args.region, ...(args.copyToRegions ?? [])];
      this.amiIds = image.outputResources.apply((resources) => {
        const amis = resources.flatMap((r) => r.amis ?? []);
        const byRegion = Object.fromEntries(
          regions.map((region) => [region, amis.find((a) => a.region === region)?.image]),
        );
        const missing = regions.filter((region) => !byRegion[region]);
        if (missing.length > 0) throw new Error(`the image build produced no AMI in ${missing.join(", ")}`);
        return byRegion as Record<string, string>;
      });
      this.amiId = this.amiIds.apply((ids) => ids[args.region]!);
    }
    this.recipeArn = recipe.arn;
    this.pipelineArn = pipeline.arn;
    this.inputsBucket = bucket.bucket;
    this.buildRoleName = role.name;
    this.registerOutputs({ amiId: this.amiId, recipeArn: this.recipeArn, pipelineArn: this.pipelineArn });
  }
}
