import { randomUUID } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import {
  DescribeInstanceAttributeCommand,
  DescribeInstancesCommand,
  DescribeVolumesCommand,
  EC2Client,
} from "@aws-sdk/client-ec2";
import { CloudCapacityError, CloudVolumeNotFoundError } from "./cloud-provider";
import { Ec2CloudProvider, type Ec2Settings } from "./ec2-cloud-provider";

// Runs against moto server (test/peers: moto on 127.0.0.1:5000); every test tags with fresh ids, so no reset is needed.
const endpoint = process.env.AWS_ENDPOINT_URL || "http://127.0.0.1:5000";
const region = process.env.AWS_REGION || "us-east-1";
process.env.AWS_ACCESS_KEY_ID ||= "test";
process.env.AWS_SECRET_ACCESS_KEY ||= "test";

const ec2 = new EC2Client({ region, endpoint });
const settings: Ec2Settings = {
  region,
  endpoint,
  tagPrefix: `cgs${randomUUID().slice(0, 6)}`,
  // moto ships a fixed set of AMIs; ami-... ids are not validated strictly.
  amiId: "ami-12c6146b",
  instanceType: "t3.micro",
  volumeType: "gp3",
  volumeDevice: "/dev/sdf",
  pageSize: 5,
};
const cloud = new Ec2CloudProvider(settings, ec2);
const zone = `${region}a`;

afterAll(() => ec2.destroy());

describe("Ec2CloudProvider against moto", () => {
  it("when an instance is launched, then it carries the account and session tags and describe finds it by tag", async () => {
    const sessionId = randomUUID();
    const { instanceId } = await cloud.launchInstance({
      accountId: "acct-1",
      sessionId,
      availabilityZone: zone,
    });
    expect(instanceId).toMatch(/^i-/);
    const raw = await ec2.send(new DescribeInstancesCommand({ InstanceIds: [instanceId] }));
    const tags = Object.fromEntries(
      (raw.Reservations?.[0]?.Instances?.[0]?.Tags ?? []).map((t) => [t.Key, t.Value]),
    );
    expect(tags).toMatchObject({
      [`${settings.tagPrefix}:account-id`]: "acct-1",
      [`${settings.tagPrefix}:session-id`]: sessionId,
      [`${settings.tagPrefix}:managed-by`]: "sessions",
    });
    const described = await cloud.describeInstances([sessionId]);
    expect(described.instances).toEqual([
      expect.objectContaining({ instanceId, sessionId, accountId: "acct-1", state: "running" }),
    ]);
    expect(described.instances[0]?.privateIp).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
  });

  it("when EC2 answers InsufficientInstanceCapacity, then launch throws a CloudCapacityError", async () => {
    // moto cannot simulate capacity: a server answering EC2's XML error shape exercises the SDK's real parsing.
    const server = http.createServer((_req, res) => {
      res.writeHead(400, { "content-type": "text/xml" });
      res.end(
        "<Response><Errors><Error><Code>InsufficientInstanceCapacity</Code>" +
          "<Message>We currently do not have sufficient capacity.</Message></Error></Errors>" +
          "<RequestID>r-1</RequestID></Response>",
      );
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const full = new EC2Client({ region, endpoint: url, maxAttempts: 1 });
    try {
      const capacityCloud = new Ec2CloudProvider({ ...settings, endpoint: url }, full);
      const launch = capacityCloud.launchInstance({
        accountId: "a",
        sessionId: randomUUID(),
        availabilityZone: zone,
      });
      await expect(launch).rejects.toBeInstanceOf(CloudCapacityError);
      await expect(launch).rejects.toMatchObject({ cloudCode: "InsufficientInstanceCapacity" });
    } finally {
      full.destroy();
      server.close();
    }
  });

  it("when more instances match than a page holds, then describe follows NextToken and counts one call per page", async () => {
    const sessionIds = Array.from({ length: 12 }, () => randomUUID());
    for (const sessionId of sessionIds) {
      await cloud.launchInstance({ accountId: "acct-3", sessionId, availabilityZone: zone });
    }
    const described = await cloud.describeInstances([...sessionIds, randomUUID()]);
    expect(new Set(described.instances.map((i) => i.sessionId))).toEqual(new Set(sessionIds));
    // 12 matches at 5 per page: 3 pages, in one filter batch.
    expect(described.calls).toBe(3);
  });

  it("when more session ids are asked than one tag filter holds, then describe splits them into batches of 200", async () => {
    const described = await cloud.describeInstances(Array.from({ length: 250 }, () => randomUUID()));
    expect(described).toEqual({ instances: [], calls: 2 });
  });

  it("when an instance is terminated, then describe reports it terminated and a repeat terminate succeeds", async () => {
    const sessionId = randomUUID();
    const { instanceId } = await cloud.launchInstance({
      accountId: "acct-4",
      sessionId,
      availabilityZone: zone,
    });
    await cloud.terminateInstance(instanceId);
    await cloud.terminateInstance(instanceId);
    const described = await cloud.describeInstances([sessionId]);
    expect(described.instances[0]?.state).toBe("terminated");
  });

  it("when a volume is created, attached and deleted, then EC2 shows each step and a repeat delete succeeds", async () => {
    const { volumeId } = await cloud.createVolume({
      accountId: "acct-5",
      sizeGb: 50,
      availabilityZone: zone,
    });
    const { instanceId } = await cloud.launchInstance({
      accountId: "acct-5",
      sessionId: randomUUID(),
      availabilityZone: zone,
    });
    let volume = (await ec2.send(new DescribeVolumesCommand({ VolumeIds: [volumeId] }))).Volumes?.[0];
    expect(volume).toMatchObject({ Size: 50, AvailabilityZone: zone, VolumeType: "gp3" });
    expect(volume?.Tags).toEqual(
      expect.arrayContaining([{ Key: `${settings.tagPrefix}:account-id`, Value: "acct-5" }]),
    );
    await cloud.attachVolume(volumeId, instanceId);
    volume = (await ec2.send(new DescribeVolumesCommand({ VolumeIds: [volumeId] }))).Volumes?.[0];
    expect(volume?.Attachments?.[0]).toMatchObject({ InstanceId: instanceId, Device: "/dev/sdf" });
    await cloud.terminateInstance(instanceId);
    await cloud.deleteVolume(volumeId);
    await cloud.deleteVolume(volumeId);
    await expect(ec2.send(new DescribeVolumesCommand({ VolumeIds: [volumeId] }))).rejects.toThrow();
  });

  it("when a volume no longer exists, then attaching it throws CloudVolumeNotFoundError (no retry brings it back)", async () => {
    const { volumeId } = await cloud.createVolume({
      accountId: "acct-6",
      sizeGb: 50,
      availabilityZone: zone,
    });
    const { instanceId } = await cloud.launchInstance({
      accountId: "acct-6",
      sessionId: randomUUID(),
      availabilityZone: zone,
    });
    await cloud.deleteVolume(volumeId);
    await expect(cloud.attachVolume(volumeId, instanceId)).rejects.toBeInstanceOf(CloudVolumeNotFoundError);
    await cloud.terminateInstance(instanceId);
  });
});

describe("capacity pools on EC2 (moto)", () => {
  const poolCloud = new Ec2CloudProvider({ ...settings, tagPrefix: `cgs${randomUUID().slice(0, 6)}` }, ec2);
  const hostAgent = { key: "k".repeat(43), reportQueueUrl: "http://127.0.0.1:5000/q", region };
  const userDataOf = async (instanceId: string) => {
    const out = await ec2.send(
      new DescribeInstanceAttributeCommand({ InstanceId: instanceId, Attribute: "userData" }),
    );
    return Buffer.from(out.UserData?.Value ?? "", "base64").toString("utf8");
  };
  const poolState = async (instanceId: string) =>
    (await poolCloud.describePoolInstances()).instances.find((i) => i.instanceId === instanceId);

  it("when a pool instance is launched, then it carries its slot's tag and no account or session, and its user data only the slot's agent settings", async () => {
    const poolId = randomUUID();
    const { instanceId } = await poolCloud.launchPoolInstance({ poolId, availabilityZone: zone, hostAgent });
    expect(await poolState(instanceId)).toMatchObject({ poolId, sessionId: null });
    expect(await poolCloud.describeInstances([poolId])).toMatchObject({ instances: [] });
    const files = await userDataOf(instanceId);
    expect(files).toContain("/etc/cgs/agent.env");
    expect(files).not.toContain("sunshine-credentials");
    expect(files).not.toContain("tailscale.env");
    const agentEnv = /path: \/etc\/cgs\/agent.env[\s\S]*?content: (\S+)/.exec(files)![1]!;
    expect(Buffer.from(agentEnv, "base64").toString("utf8")).toContain(`CGS_POOL_ID=${poolId}`);
  });

  it("when a pool instance is parked, the account's volume attached while stopped, started and claimed, then EC2 shows each step and describe by session finds it", async () => {
    const poolId = randomUUID();
    const { instanceId } = await poolCloud.launchPoolInstance({ poolId, availabilityZone: zone, hostAgent });
    await poolCloud.stopInstance(instanceId);
    expect(["stopping", "stopped"]).toContain((await poolState(instanceId))?.state);
    const { volumeId } = await poolCloud.createVolume({
      accountId: "acct-pool",
      sizeGb: 50,
      availabilityZone: zone,
    });
    await poolCloud.attachVolume(volumeId, instanceId);
    const volume = await ec2.send(new DescribeVolumesCommand({ VolumeIds: [volumeId] }));
    expect(volume.Volumes?.[0]?.Attachments?.[0]?.InstanceId).toBe(instanceId);
    await poolCloud.startInstance(instanceId);
    expect(["pending", "running"]).toContain((await poolState(instanceId))?.state);
    const sessionId = randomUUID();
    await poolCloud.claimInstance(instanceId, { sessionId, accountId: "acct-pool" });
    expect(await poolState(instanceId)).toMatchObject({ sessionId });
    expect((await poolCloud.describeInstances([sessionId])).instances).toEqual([
      expect.objectContaining({ instanceId, sessionId, accountId: "acct-pool" }),
    ]);
    await poolCloud.terminateInstance(instanceId);
    expect(await poolState(instanceId)).toBeUndefined();
  });
});
