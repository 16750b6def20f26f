import * as pulumi from "@pulumi/pulumi";
import type { PolicyStatementArgs } from "./iam-policy";
import { DEPLOYABLES, type Deployable, type DeployableName, type SharedSecretName } from "./service-catalog";

export interface WorkloadPolicyContext {
  region: string;
  accountId: pulumi.Input<string>;
  queueArns: Partial<Record<DeployableName, pulumi.Input<string>>>;
  sharedSecretArns: Record<SharedSecretName, pulumi.Input<string>>;
  databaseSecretArns: Partial<Record<DeployableName, pulumi.Input<string>>>;
  /** The queue streaming hosts' agents send their reports to; the sessions service consumes it. */
  hostReportsQueueArn: pulumi.Input<string>;
  streaming: {
    /** One streaming fleet per region (the home region's among them); the role acts in these regions only. */
    fleets: StreamingFleetArns[];
    /** The streaming instances' role (their instance profile); launching them passes it to EC2. */
    hostRoleArn: pulumi.Input<string>;
    /** CLOUD_TAG_PREFIX: sessions tags what it creates <prefix>:session-id / <prefix>:account-id. */
    tagPrefix: string;
  };
}

/** What the sessions role may launch in one fleet region. */
export interface StreamingFleetArns {
  region: string;
  launchTemplateArn: pulumi.Input<string>;
  securityGroupArn: pulumi.Input<string>;
  subnetIds: pulumi.Input<string>[];
  /** The image the region's launch template starts: the stack's build (or its copy), or the override. */
  amiId: pulumi.Input<string>;
}

const SECRET_READ = ["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"];

function ec2Arn(
  ctx: WorkloadPolicyContext,
  region: string,
  resource: pulumi.Input<string>,
): pulumi.Output<string> {
  return pulumi.interpolate`arn:aws:ec2:${region}:${ctx.accountId}:${resource}`;
}

/**
 * EC2 rights of the sessions service: launch only from the streaming template, create only what
 * it tags with its prefix, and act only on instances and volumes carrying <prefix>:account-id, or on the
 * capacity pools' instances (<prefix>:managed-by = sessions with a <prefix>:pool-id, no account yet).
 */
function streamingStatements(ctx: WorkloadPolicyContext): PolicyStatementArgs[] {
  const s = ctx.streaming;
  // Instances and volumes of every fleet region; the conditions (tags) are the same in each.
  const inEveryRegion = (...resources: string[]) =>
    s.fleets.flatMap((f) => resources.map((r) => ec2Arn(ctx, f.region, r)));
  const requestTagged = { "ForAnyValue:StringLike": { "aws:TagKeys": [`${s.tagPrefix}:*`] } };
  const resourceTagged = { StringLike: { [`aws:ResourceTag/${s.tagPrefix}:account-id`]: "*" } };
  const managedBy = `${s.tagPrefix}:managed-by`;
  // The launch template and every launch tag instances managed-by=sessions; a pool launch adds its pool-id. Both
  // tags are set only at launch (TagOnlyWhileCreating) or kept as they are by a claim (ClaimPoolInstances).
  const poolInstance = {
    StringEquals: { [`aws:ResourceTag/${managedBy}`]: "sessions" },
    StringLike: { [`aws:ResourceTag/${s.tagPrefix}:pool-id`]: "*" },
  };
  return [
    {
      Sid: "LaunchTaggedInstances",
      Effect: "Allow",
      Action: ["ec2:RunInstances"],
      Resource: inEveryRegion("instance/*", "volume/*"),
      Condition: requestTagged,
    },
    {
      Sid: "LaunchFromTheStreamingTemplateOnly",
      Effect: "Allow",
      Action: ["ec2:RunInstances"],
      Resource: s.fleets.flatMap((f) => [
        f.launchTemplateArn,
        f.securityGroupArn,
        pulumi.interpolate`arn:aws:ec2:${f.region}::image/${f.amiId}`,
        ec2Arn(ctx, f.region, "network-interface/*"),
        ...f.subnetIds.map((id) => ec2Arn(ctx, f.region, pulumi.interpolate`subnet/${id}`)),
      ]),
    },
    {
      Sid: "PassTheStreamingHostRoleToEc2",
      Effect: "Allow",
      Action: ["iam:PassRole"],
      Resource: [s.hostRoleArn],
      Condition: { StringEquals: { "iam:PassedToService": "ec2.amazonaws.com" } },
    },
    {
      Sid: "TagOnlyWhileCreating",
      Effect: "Allow",
      Action: ["ec2:CreateTags"],
      Resource: inEveryRegion("instance/*", "volume/*"),
      Condition: { StringEquals: { "ec2:CreateAction": ["RunInstances", "CreateVolume"] } },
    },
    {
      Sid: "ControlOwnInstances",
      Effect: "Allow",
      Action: ["ec2:StartInstances", "ec2:StopInstances", "ec2:RebootInstances", "ec2:TerminateInstances"],
      Resource: inEveryRegion("instance/*"),
      Condition: resourceTagged,
    },
    {
      Sid: "ControlPoolInstances",
      Effect: "Allow",
      Action: ["ec2:StartInstances", "ec2:StopInstances", "ec2:TerminateInstances"],
      Resource: inEveryRegion("instance/*"),
      Condition: poolInstance,
    },
    {
      // A claim tags the pool instance with its session and account; it may add nothing else, and managed-by
      // (re-sent by the claim) must stay sessions, so no claim can take an instance out of the service's hands.
      Sid: "ClaimPoolInstances",
      Effect: "Allow",
      Action: ["ec2:CreateTags"],
      Resource: inEveryRegion("instance/*"),
      Condition: {
        ...poolInstance,
        "ForAllValues:StringEquals": {
          "aws:TagKeys": [`${s.tagPrefix}:account-id`, `${s.tagPrefix}:session-id`, managedBy],
        },
        StringEqualsIfExists: { [`aws:RequestTag/${managedBy}`]: "sessions" },
      },
    },
    {
      // The instance side of attaching an account's volume to a pool instance; the volume side is ManageOwnVolumes
      // (the volume carries its account-id).
      Sid: "AttachVolumesToPoolInstances",
      Effect: "Allow",
      Action: ["ec2:AttachVolume"],
      Resource: inEveryRegion("instance/*"),
      Condition: poolInstance,
    },
    {
      Sid: "CreateTaggedVolumes",
      Effect: "Allow",
      Action: ["ec2:CreateVolume"],
      Resource: inEveryRegion("volume/*"),
      Condition: requestTagged,
    },
    {
      Sid: "ManageOwnVolumes",
      Effect: "Allow",
      Action: ["ec2:AttachVolume", "ec2:DetachVolume", "ec2:DeleteVolume"],
      Resource: inEveryRegion("instance/*", "volume/*"),
      Condition: resourceTagged,
    },
    {
      Sid: "DescribeHasNoResourceLevelPermissions",
      Effect: "Allow",
      Action: ["ec2:DescribeInstances", "ec2:DescribeInstanceStatus", "ec2:DescribeVolumes"],
      Resource: "*",
    },
  ];
}

/** The least-privilege statements of one deployable, derived from the service catalog. */
export function deployableStatements(d: Deployable, ctx: WorkloadPolicyContext): PolicyStatementArgs[] {
  const statements: PolicyStatementArgs[] = [];
  const own = ctx.queueArns[d.name];
  if (d.consumesQueue) {
    if (!own) throw new Error(`${d.name} consumes a queue but none was created`);
    statements.push({
      Sid: "ConsumeOwnQueue",
      Effect: "Allow",
      Action: [
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        "sqs:ChangeMessageVisibility",
        "sqs:GetQueueAttributes",
        "sqs:GetQueueUrl",
      ],
      Resource: [own],
    });
  }
  if (d.publishesTo.length > 0) {
    statements.push({
      Sid: "PublishToConsumers",
      Effect: "Allow",
      Action: ["sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"],
      Resource: d.publishesTo.map((target) => {
        const arn = ctx.queueArns[target];
        if (!arn) throw new Error(`${d.name} publishes to ${target}, which has no queue`);
        return arn;
      }),
    });
  }
  const secretArns: pulumi.Input<string>[] = [];
  const dbSecret = ctx.databaseSecretArns[d.name];
  if (d.database) {
    if (!dbSecret) throw new Error(`${d.name} has a database but no credentials secret`);
    secretArns.push(dbSecret);
  }
  for (const key of Object.keys(d.secrets) as SharedSecretName[]) secretArns.push(ctx.sharedSecretArns[key]);
  if (secretArns.length > 0) {
    statements.push({ Sid: "ReadOwnSecrets", Effect: "Allow", Action: SECRET_READ, Resource: secretArns });
  }
  if (d.managesStreamingInstances) {
    statements.push({
      Sid: "ConsumeHostReports",
      Effect: "Allow",
      Action: [
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        "sqs:ChangeMessageVisibility",
        "sqs:GetQueueAttributes",
        "sqs:GetQueueUrl",
      ],
      Resource: [ctx.hostReportsQueueArn],
    });
    statements.push(...streamingStatements(ctx));
  }
  return statements;
}

/**
 * The streaming instances' own rights (their instance profile): the host agent sends its reports to the
 * host-reports queue, and that is all. The agent is baked into the image, so nothing is read at boot.
 */
export function streamingHostStatements(hostReportsQueueArn: pulumi.Input<string>): PolicyStatementArgs[] {
  return [
    {
      Sid: "SendHostReports",
      Effect: "Allow",
      Action: ["sqs:SendMessage"],
      Resource: [hostReportsQueueArn],
    },
  ];
}

/**
 * The image build instance's rights beyond Image Builder's managed policies: read this stack's build inputs (the
 * image files and the host agent) and AWS's NVIDIA gaming driver archive.
 */
export function imageBuildStatements(inputsBucketArn: pulumi.Input<string>): PolicyStatementArgs[] {
  return [
    {
      Sid: "ReadImageBuildInputs",
      Effect: "Allow",
      Action: ["s3:GetObject"],
      Resource: [
        pulumi.interpolate`${inputsBucketArn}/image-files/*`,
        pulumi.interpolate`${inputsBucketArn}/host-agent/*`,
      ],
    },
    {
      Sid: "ListNvidiaGamingDrivers",
      Effect: "Allow",
      Action: ["s3:ListBucket"],
      Resource: ["arn:aws:s3:::nvidia-gaming"],
      Condition: { StringLike: { "s3:prefix": ["linux/*"] } },
    },
    {
      Sid: "ReadNvidiaGamingDrivers",
      Effect: "Allow",
      Action: ["s3:GetObject"],
      Resource: ["arn:aws:s3:::nvidia-gaming/linux/*"],
    },
  ];
}

export function allDeployableStatements(
  ctx: WorkloadPolicyContext,
): Record<DeployableName, PolicyStatementArgs[]> {
  return Object.fromEntries(DEPLOYABLES.map((d) => [d.name, deployableStatements(d, ctx)])) as Record<
    DeployableName,
    PolicyStatementArgs[]
  >;
}

export function collectorStatements(): PolicyStatementArgs[] {
  return [
    {
      Sid: "XRayHasNoResourceLevelPermissions",
      Effect: "Allow",
      Action: [
        "xray:PutTraceSegments",
        "xray:PutTelemetryRecords",
        "xray:GetSamplingRules",
        "xray:GetSamplingTargets",
        "xray:GetSamplingStatisticSummaries",
      ],
      Resource: "*",
    },
  ];
}

export function databaseBootstrapStatements(
  masterSecretArn: pulumi.Input<string>,
  databaseSecretArns: pulumi.Input<string>[],
): PolicyStatementArgs[] {
  return [
    {
      Sid: "ReadDatabaseCredentials",
      Effect: "Allow",
      Action: SECRET_READ,
      Resource: [masterSecretArn, ...databaseSecretArns],
    },
  ];
}

/** Headscale (self-hosted private network) reads its noise key and its database credentials, nothing else. */
export function headscaleStatements(
  secretArn: pulumi.Input<string>,
  databaseSecretArn: pulumi.Input<string>,
): PolicyStatementArgs[] {
  return [
    { Sid: "ReadOwnSecrets", Effect: "Allow", Action: SECRET_READ, Resource: [secretArn, databaseSecretArn] },
  ];
}
