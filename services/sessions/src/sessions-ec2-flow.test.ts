import { randomUUID } from "node:crypto";
import { DescribeInstanceAttributeCommand, DescribeVolumesCommand, EC2Client } from "@aws-sdk/client-ec2";
import { slotTag, systemClock } from "@cgs/shared";
import { and, desc, eq } from "drizzle-orm";
import { HostSecrets, withHostSecrets } from "./adapters/credential-issuing-cloud";
import { SimulatedStreamingHost } from "./adapters/streaming-host";
import { sessionsTable } from "./data/session-tables";
import type { StreamingCredentials } from "./domain/streaming-credentials";
import { Ec2CloudProvider } from "./adapters/ec2-cloud-provider";
import { TailscalePrivateNetwork } from "./adapters/tailscale-private-network";
import { slotLeases } from "./composition";
import { findSlot } from "./data/private-network-repository";
import { startTailscaleStandIn, type TailscaleStandIn } from "./testing/streaming-stand-ins";
import type { CloudProvider } from "./adapters/cloud-provider";
import { Reconciler } from "./domain/reconciler";
import type { SessionsDomainDeps } from "./domain/session-deps";
import { pollSession } from "./domain/session-access";
import { startSession } from "./domain/start-session";
import { stopSession } from "./domain/stop-session";
import { startSessionsHarness, type SessionsHarness } from "./testing/sessions-harness";
import { onCloud } from "./testing/on-cloud";

let h: SessionsHarness;
let ec2: EC2Client;
let tailscale: TailscaleStandIn;
let n = 0;
const account = () => `ec2-${Date.now().toString(36)}-${(n += 1)}`;
const settings = { batchSize: 100, leaseMs: 30_000, startTimeoutMs: 60_000, describeGraceMs: 0 };

/** The EC2 adapter on moto, with its own tag prefix so other tests' instances are not its own. */
const ec2Provider = () =>
  new Ec2CloudProvider(
    {
      region: h.config.CLOUD_REGION,
      tagPrefix: `cgs${randomUUID().slice(0, 6)}`,
      amiId: "ami-12c6146b",
      instanceType: "t3.micro",
      volumeType: "gp3",
      volumeDevice: "/dev/sdf",
      pageSize: 50,
    },
    ec2,
  );

beforeAll(async () => {
  h = await startSessionsHarness();
  tailscale = await startTailscaleStandIn({ apiKey: "tskey-api-ec2" });
  ec2 = new EC2Client({
    region: h.config.CLOUD_REGION,
    endpoint: process.env.AWS_ENDPOINT_URL || "http://127.0.0.1:5000",
  });
});
afterAll(async () => {
  ec2.destroy();
  await tailscale.close();
  await h.close();
});

async function pollSessionRow(accountId: string) {
  const [row] = await h.database.db
    .select({ id: sessionsTable.id })
    .from(sessionsTable)
    .where(and(eq(sessionsTable.accountId, accountId)))
    .orderBy(desc(sessionsTable.createdAt))
    .limit(1);
  return row!;
}

describe("the session lifecycle on the EC2 adapter (moto)", () => {
  it("when a session starts, runs and stops on EC2, then its user data carries its own credentials and an account-tagged host key, the volume is kept and the states follow", async () => {
    const cloud = ec2Provider();
    // The real composition: each launch issues the instance's own streaming-host credentials and private-network
    // key into its user data, the key minted by the Tailscale adapter (against the Tailscale-shaped stand-in).
    const network = new TailscalePrivateNetwork(
      {
        apiUrl: tailscale.url,
        tailnet: "-",
        apiKey: "tskey-api-ec2",
        timeoutMs: 2_000,
        deviceTags: h.config.VPN_KEY_TAGS,
        hostTag: h.config.VPN_HOST_TAG,
        devicesCacheMs: 0,
      },
      slotLeases(h.database.db, h.config.TAILSCALE_SLOTS),
    );
    const issuing = withHostSecrets(
      cloud,
      new HostSecrets(h.vault, {
        network,
        db: h.database.db,
        clock: systemClock,
        keyTtlSeconds: h.config.VPN_HOST_KEY_TTL_SECONDS,
        reports: { queueUrl: h.reportQueueUrl, region: "us-east-1" },
      }),
    );
    const host = new SimulatedStreamingHost({
      readyDelayMs: 0,
      credentials: (sessionId) => h.vault.forSession(sessionId),
      installed: (ip) => installedByIp.get(ip),
    });
    const installedByIp = new Map<string, StreamingCredentials>();
    const deps: SessionsDomainDeps = { ...onCloud(h.deps, issuing), streamingHost: host };
    const reconciler = new Reconciler(deps, settings);
    const acct = account();
    const token = await h.token(acct);

    const started = await startSession(deps, { accountId: acct, accessToken: token });
    expect(started).toMatchObject({ state: "starting" });
    const userData = await ec2.send(
      new DescribeInstanceAttributeCommand({ InstanceId: started.instanceId!, Attribute: "userData" }),
    );
    const cloudConfig = Buffer.from(userData.UserData?.Value ?? "", "base64").toString("utf8");
    const [envFile, tailscaleFile, agentFile] = [...cloudConfig.matchAll(/content: (\S+)/g)].map((m) =>
      Buffer.from(m[1]!, "base64").toString("utf8"),
    );
    const sessionId = (await pollSessionRow(acct)).id;
    const credentials = await h.vault.forSession(sessionId);
    // The host agent gets its session, that session's own signing key and the queue to report to.
    expect(cloudConfig).toContain("path: /etc/cgs/agent.env");
    expect(agentFile).toBe(
      `CGS_SESSION_ID=${sessionId}\nCGS_AGENT_KEY=${h.vault.agentKey(sessionId).toString("base64url")}\n` +
        `CGS_REPORT_QUEUE_URL=${await h.reportQueueUrl()}\nAWS_REGION=us-east-1\n`,
    );
    expect(envFile).toBe(
      `SUNSHINE_USERNAME=${credentials!.username}\nSUNSHINE_PASSWORD=${credentials!.password}\n`,
    );
    // The host joins with a single-use, non-ephemeral key tagged with the host tag and its account's slot tag only;
    // the tailnet policy (written once by infra) is never touched.
    const slot = await findSlot(h.database.db, acct);
    expect(tailscale.keys.at(-1)!.body).toMatchObject({
      capabilities: {
        devices: {
          create: {
            reusable: false,
            ephemeral: false,
            preauthorized: true,
            tags: ["tag:cgs-host", slotTag(slot!)],
          },
        },
      },
    });
    const minted = tailscale.requests.filter((r) => r.method === "POST" && r.path.endsWith("/keys")).length;
    expect(tailscaleFile).toBe(`TS_AUTHKEY=tskey-auth-k${minted}CNTRL-${"x".repeat(32)}\n`);
    expect(tailscale.requests.filter((r) => r.path.endsWith("/acl"))).toEqual([]);
    await reconciler.tick();
    const launched = await pollSession(deps, acct);
    installedByIp.set(launched.privateNetIp!, credentials!);
    await reconciler.tick();
    const running = await pollSession(deps, acct);
    expect(running).toMatchObject({ state: "running", ready: true, instanceId: started.instanceId });
    const volumes = await ec2.send(
      new DescribeVolumesCommand({
        Filters: [{ Name: "attachment.instance-id", Values: [started.instanceId!] }],
      }),
    );
    expect(volumes.Volumes?.[0]).toMatchObject({ Size: 100 });
    const volumeId = volumes.Volumes?.[0]?.VolumeId;

    expect((await stopSession(deps, acct)).state).toBe("stopping");
    await reconciler.tick();
    expect((await pollSession(deps, acct)).state).toBe("stopped");
    const kept = await ec2.send(new DescribeVolumesCommand({ VolumeIds: [volumeId!] }));
    expect(kept.Volumes).toHaveLength(1);
  });
});

describe("a stop that lands while the instance is being launched", () => {
  it("when stop wins the race, then the start terminates its instance, releases the hold and the session ends stopped", async () => {
    const acct = account();
    const token = await h.token(acct);
    let releaseLaunch: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (releaseLaunch = resolve));
    let launchedId = "";
    const slowCloud: CloudProvider = Object.assign(Object.create(h.cloud) as CloudProvider, {
      launchInstance: async (request: Parameters<CloudProvider["launchInstance"]>[0]) => {
        await gate;
        const out = await h.cloud.launchInstance(request);
        launchedId = out.instanceId;
        return out;
      },
    });
    const deps: SessionsDomainDeps = onCloud(h.deps, slowCloud);
    const starting = startSession(deps, { accountId: acct, accessToken: token });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect((await stopSession(h.deps, acct)).state).toBe("stopping");
    releaseLaunch();
    const result = await starting;
    expect(result.state).toBe("stopped");
    expect(h.cloud.instance(launchedId)?.state).toBe("terminated");
    const holds = h.billing.holds.filter((x) => x.accountId === acct);
    expect(holds.map((x) => x.released)).toEqual([true]);
    expect((await pollSession(h.deps, acct)).state).toBe("stopped");
  });
});

describe("a launch whose response is lost (EC2 on moto)", () => {
  it("when the launch succeeds in the cloud but its answer never arrives, then the start fails, the hold is released and the next orphan sweep terminates the instance", async () => {
    const real = ec2Provider();
    // moto cannot drop a response: the launch really happens on moto, then this wrapper loses its answer.
    const lossy: CloudProvider = Object.assign(Object.create(real) as CloudProvider, {
      launchInstance: async (request: Parameters<CloudProvider["launchInstance"]>[0]) => {
        await real.launchInstance(request);
        throw new Error("socket hang up");
      },
      listManagedInstances: () => real.listManagedInstances(),
    });
    const deps: SessionsDomainDeps = onCloud(h.deps, lossy);
    const acct = account();
    const token = await h.token(acct);

    await expect(startSession(deps, { accountId: acct, accessToken: token })).rejects.toMatchObject({
      code: "UNAVAILABLE",
    });
    expect(h.billing.holds.filter((x) => x.accountId === acct).map((x) => x.released)).toEqual([true]);
    const before = await real.listManagedInstances();
    expect(before.instances.filter((i) => i.accountId === acct)).toHaveLength(1);

    const swept = await new Reconciler(onCloud(h.deps, real), settings).sweepOrphans();
    expect(swept.terminated).toEqual([before.instances.find((i) => i.accountId === acct)!.instanceId]);
    expect((await real.listManagedInstances()).instances).toEqual([]);
  });
});
