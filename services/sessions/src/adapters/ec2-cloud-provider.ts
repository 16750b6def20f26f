import {
  AttachVolumeCommand,
  CreateTagsCommand,
  CreateVolumeCommand,
  DeleteVolumeCommand,
  DescribeInstancesCommand,
  EC2Client,
  RunInstancesCommand,
  StartInstancesCommand,
  StopInstancesCommand,
  TerminateInstancesCommand,
  type Instance,
  type RunInstancesCommandInput,
  type Filter,
  type Tag,
  type VolumeType,
} from "@aws-sdk/client-ec2";
import {
  CloudCapacityError,
  CloudVolumeNotFoundError,
  type CloudInstance,
  type CloudProvider,
  type CreateVolumeRequest,
  type DescribeResult,
  type InstanceState,
  type LaunchRequest,
  type PoolInstance,
  type PoolLaunchRequest,
} from "./cloud-provider";

export interface Ec2Settings {
  region: string;
  /** Endpoint override (moto); unset in production. */
  endpoint?: string;
  tagPrefix: string;
  launchTemplate?: string;
  launchTemplateVersion?: string;
  amiId?: string;
  instanceType: string;
  subnetId?: string;
  securityGroupIds?: string[];
  volumeType: string;
  volumeDevice: string;
  /** DescribeInstances MaxResults (5-1000). */
  pageSize: number;
}

/**
 * cloud-init for the streaming image: writes the instance's own Sunshine API credentials, the single-use key its
 * boot unit joins the private network with, and its host agent's session, signing key and report queue (all read
 * by the image's boot units; files 0600, root only).
 */
export function streamingUserData(request: LaunchRequest | PoolLaunchRequest): string {
  const file = (path: string, content: string) => [
    `  - path: ${path}`,
    "    permissions: '0600'",
    "    encoding: b64",
    `    content: ${Buffer.from(content).toString("base64")}`,
  ];
  const session = "sessionId" in request ? request : undefined;
  const { hostAgent } = request;
  const credentials = session?.streamingCredentials;
  const privateNetworkKey = session?.privateNetworkKey;
  const cloudConfig = [
    "#cloud-config",
    "write_files:",
    ...(credentials
      ? file(
          "/etc/cgs/sunshine-credentials.env",
          `SUNSHINE_USERNAME=${credentials.username}\nSUNSHINE_PASSWORD=${credentials.password}\n`,
        )
      : []),
    ...(privateNetworkKey
      ? file(
          "/etc/cgs/tailscale.env",
          `TS_AUTHKEY=${privateNetworkKey}\n` +
            (session?.privateNetworkLoginServer
              ? `TS_LOGIN_SERVER=${session.privateNetworkLoginServer}\n`
              : ""),
        )
      : []),
    ...(hostAgent
      ? file(
          "/etc/cgs/agent.env",
          [
            // A pool instance waits in standby under its slot until a session claims it.
            session
              ? `CGS_SESSION_ID=${session.sessionId}`
              : `CGS_POOL_ID=${(request as PoolLaunchRequest).poolId}`,
            `CGS_AGENT_KEY=${hostAgent.key}`,
            `CGS_REPORT_QUEUE_URL=${hostAgent.reportQueueUrl}`,
            `AWS_REGION=${hostAgent.region}`,
            "",
          ].join("\n"),
        )
      : []),
    "",
  ].join("\n");
  return Buffer.from(cloudConfig).toString("base64");
}

/** EC2's codes for "no capacity right now" (RunInstances), all transient from the user's point of view. */
const CAPACITY_ERROR_CODES = new Set([
  "InsufficientInstanceCapacity",
  "InsufficientHostCapacity",
  "InsufficientReservedInstanceCapacity",
  "InsufficientCapacity",
  "InsufficientCapacityOnOutpost",
  "InstanceLimitExceeded",
  "VcpuLimitExceeded",
]);

const NOT_FOUND_CODES = new Set(["InvalidInstanceID.NotFound", "InvalidVolume.NotFound"]);

// EC2 accepts at most 200 values in one filter.
const FILTER_VALUES_MAX = 200;

function errorCode(err: unknown): string {
  if (typeof err === "object" && err !== null) {
    const e = err as { name?: unknown; Code?: unknown };
    if (typeof e.Code === "string") return e.Code;
    if (typeof e.name === "string") return e.name;
  }
  return "";
}

function tagValue(tags: Tag[] | undefined, key: string): string | undefined {
  return tags?.find((t) => t.Key === key)?.Value;
}

export function createEc2Client(settings: Pick<Ec2Settings, "region" | "endpoint">): EC2Client {
  return new EC2Client({
    region: settings.region,
    ...(settings.endpoint ? { endpoint: settings.endpoint } : {}),
  });
}

/** CloudProvider on Amazon EC2 (or moto through an endpoint override). */
export class Ec2CloudProvider implements CloudProvider {
  readonly region: string;
  private readonly sessionTag: string;
  private readonly accountTag: string;
  private readonly managedTag: string;
  private readonly poolTag: string;

  constructor(
    private readonly settings: Ec2Settings,
    private readonly ec2: EC2Client = createEc2Client(settings),
  ) {
    this.region = settings.region;
    this.sessionTag = `${settings.tagPrefix}:session-id`;
    this.accountTag = `${settings.tagPrefix}:account-id`;
    this.managedTag = `${settings.tagPrefix}:managed-by`;
    this.poolTag = `${settings.tagPrefix}:pool-id`;
  }

  private tags(accountId: string, sessionId?: string): Tag[] {
    return [
      { Key: this.accountTag, Value: accountId },
      ...(sessionId ? [{ Key: this.sessionTag, Value: sessionId }] : []),
      { Key: this.managedTag, Value: "sessions" },
    ];
  }

  async launchInstance(request: LaunchRequest): Promise<{ instanceId: string }> {
    return this.runInstance(
      request,
      request.sessionId,
      this.tags(request.accountId, request.sessionId),
      request.streamingCredentials || request.hostAgent ? streamingUserData(request) : undefined,
    );
  }

  async launchPoolInstance(request: PoolLaunchRequest): Promise<{ instanceId: string }> {
    return this.runInstance(
      request,
      `pool-${request.poolId}`,
      [
        { Key: this.poolTag, Value: request.poolId },
        { Key: this.managedTag, Value: "sessions" },
      ],
      request.hostAgent ? streamingUserData(request) : undefined,
    );
  }

  private async runInstance(
    request: { availabilityZone: string },
    clientToken: string,
    tags: Tag[],
    userData: string | undefined,
  ): Promise<{ instanceId: string }> {
    const s = this.settings;
    const input: RunInstancesCommandInput = {
      MinCount: 1,
      MaxCount: 1,
      // EC2's own idempotency: a retried launch for the same session (or pool slot) returns the same instance.
      ClientToken: clientToken,
      Placement: { AvailabilityZone: request.availabilityZone },
      TagSpecifications: [{ ResourceType: "instance", Tags: tags }],
      ...(s.launchTemplate
        ? {
            LaunchTemplate: s.launchTemplate.startsWith("lt-")
              ? { LaunchTemplateId: s.launchTemplate, Version: s.launchTemplateVersion }
              : { LaunchTemplateName: s.launchTemplate, Version: s.launchTemplateVersion },
          }
        : { ImageId: s.amiId, InstanceType: s.instanceType as RunInstancesCommandInput["InstanceType"] }),
      ...(userData ? { UserData: userData } : {}),
      ...(s.subnetId ? { SubnetId: s.subnetId } : {}),
      ...(s.securityGroupIds && s.securityGroupIds.length > 0
        ? { SecurityGroupIds: s.securityGroupIds }
        : {}),
    };
    try {
      const out = await this.ec2.send(new RunInstancesCommand(input));
      const instanceId = out.Instances?.[0]?.InstanceId;
      if (!instanceId) throw new Error("RunInstances returned no instance");
      return { instanceId };
    } catch (err) {
      const code = errorCode(err);
      if (CAPACITY_ERROR_CODES.has(code)) {
        throw new CloudCapacityError(`The region ${this.region} is out of capacity`, code);
      }
      throw err;
    }
  }

  async describeInstances(sessionIds: readonly string[]): Promise<DescribeResult> {
    const result: DescribeResult = { instances: [], calls: 0 };
    for (let i = 0; i < sessionIds.length; i += FILTER_VALUES_MAX) {
      const values = sessionIds.slice(i, i + FILTER_VALUES_MAX);
      await this.describePages([{ Name: `tag:${this.sessionTag}`, Values: [...values] }], result);
    }
    return result;
  }

  async listManagedInstances(): Promise<DescribeResult> {
    const result: DescribeResult = { instances: [], calls: 0 };
    await this.describePages(
      [
        { Name: `tag:${this.managedTag}`, Values: ["sessions"] },
        { Name: "instance-state-name", Values: ["pending", "running", "stopping", "stopped"] },
      ],
      result,
    );
    return result;
  }

  /** One DescribeInstances per page of `filters`' matches, following NextToken, into `result`. */
  private async describePages(filters: Filter[], result: DescribeResult): Promise<void> {
    let nextToken: string | undefined;
    do {
      const out = await this.ec2.send(
        new DescribeInstancesCommand({
          Filters: filters,
          MaxResults: this.settings.pageSize,
          NextToken: nextToken,
        }),
      );
      result.calls += 1;
      for (const reservation of out.Reservations ?? []) {
        for (const instance of reservation.Instances ?? []) {
          const mapped = this.toCloudInstance(instance);
          if (mapped) result.instances.push(mapped);
        }
      }
      nextToken = out.NextToken || undefined;
    } while (nextToken);
  }

  private toCloudInstance(instance: Instance): CloudInstance | undefined {
    const sessionId = tagValue(instance.Tags, this.sessionTag);
    if (!instance.InstanceId || !sessionId) return undefined;
    return {
      instanceId: instance.InstanceId,
      sessionId,
      accountId: tagValue(instance.Tags, this.accountTag) ?? "",
      state: (instance.State?.Name ?? "pending") as InstanceState,
      publicIp: instance.PublicIpAddress ?? null,
      privateIp: instance.PrivateIpAddress ?? null,
    };
  }

  async terminateInstance(instanceId: string): Promise<void> {
    try {
      await this.ec2.send(new TerminateInstancesCommand({ InstanceIds: [instanceId] }));
    } catch (err) {
      if (!NOT_FOUND_CODES.has(errorCode(err))) throw err;
    }
  }

  async createVolume(request: CreateVolumeRequest): Promise<{ volumeId: string }> {
    const out = await this.ec2.send(
      new CreateVolumeCommand({
        AvailabilityZone: request.availabilityZone,
        Size: request.sizeGb,
        VolumeType: this.settings.volumeType as VolumeType,
        TagSpecifications: [{ ResourceType: "volume", Tags: this.tags(request.accountId) }],
      }),
    );
    if (!out.VolumeId) throw new Error("CreateVolume returned no volume id");
    return { volumeId: out.VolumeId };
  }

  async attachVolume(volumeId: string, instanceId: string): Promise<void> {
    try {
      await this.ec2.send(
        new AttachVolumeCommand({
          VolumeId: volumeId,
          InstanceId: instanceId,
          Device: this.settings.volumeDevice,
        }),
      );
    } catch (err) {
      if (errorCode(err) === "InvalidVolume.NotFound") throw new CloudVolumeNotFoundError(volumeId);
      throw err;
    }
  }

  async deleteVolume(volumeId: string): Promise<void> {
    try {
      await this.ec2.send(new DeleteVolumeCommand({ VolumeId: volumeId }));
    } catch (err) {
      if (!NOT_FOUND_CODES.has(errorCode(err))) throw err;
    }
  }

  // ---------- capacity pools ----------

  async describePoolInstances(): Promise<{ instances: PoolInstance[]; calls: number }> {
    const instances: PoolInstance[] = [];
    let calls = 0;
    let nextToken: string | undefined;
    do {
      const out = await this.ec2.send(
        new DescribeInstancesCommand({
          Filters: [
            { Name: "tag-key", Values: [this.poolTag] },
            { Name: "instance-state-name", Values: ["pending", "running", "stopping", "stopped"] },
          ],
          MaxResults: this.settings.pageSize,
          NextToken: nextToken,
        }),
      );
      calls += 1;
      for (const reservation of out.Reservations ?? []) {
        for (const instance of reservation.Instances ?? []) {
          const poolId = tagValue(instance.Tags, this.poolTag);
          if (!instance.InstanceId || !poolId) continue;
          instances.push({
            instanceId: instance.InstanceId,
            poolId,
            sessionId: tagValue(instance.Tags, this.sessionTag) ?? null,
            state: (instance.State?.Name ?? "pending") as InstanceState,
            publicIp: instance.PublicIpAddress ?? null,
            privateIp: instance.PrivateIpAddress ?? null,
          });
        }
      }
      nextToken = out.NextToken || undefined;
    } while (nextToken);
    return { instances, calls };
  }

  async stopInstance(instanceId: string): Promise<void> {
    await this.ec2.send(new StopInstancesCommand({ InstanceIds: [instanceId] }));
  }

  async startInstance(instanceId: string): Promise<void> {
    try {
      await this.ec2.send(new StartInstancesCommand({ InstanceIds: [instanceId] }));
    } catch (err) {
      const code = errorCode(err);
      if (CAPACITY_ERROR_CODES.has(code)) {
        throw new CloudCapacityError(
          `The region ${this.region} has no capacity to start ${instanceId}`,
          code,
        );
      }
      throw err;
    }
  }

  async claimInstance(instanceId: string, owner: { sessionId: string; accountId: string }): Promise<void> {
    await this.ec2.send(
      new CreateTagsCommand({ Resources: [instanceId], Tags: this.tags(owner.accountId, owner.sessionId) }),
    );
  }
}
