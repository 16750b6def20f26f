import { STREAMING_TCP_PORTS, STREAMING_UDP_PORT_RANGE, headscalePolicy } from "@cgs/shared";
import { runStack, ofType, type StackRun } from "./testing/stack-harness";
import {
  describeStackInvariants,
  inlinePolicyOf,
  platformValues,
  renderChartWithProgramValues,
} from "./testing/stack-invariants";
import { describeStackOutputs } from "./testing/stack-outputs";
import { describeFleetRegions } from "./testing/stack-regions";

let run: StackRun;
beforeAll(async () => {
  run = await runStack("staging");
}, 120_000);

describeStackInvariants("staging", () => run);
describeStackOutputs("staging", () => run);
describeFleetRegions("staging", () => run);

describe("stack staging: sized small through its config", () => {
  it("when staging runs, then it shares one NAT gateway and a single-AZ database", () => {
    expect(ofType(run, "aws:ec2/natGateway:NatGateway")).toHaveLength(1);
    expect(ofType(run, "aws:rds/instance:Instance")[0]?.inputs.multiAz).toBe(false);
    expect(platformValues(run).services.gateway?.replicas).toBe(1);
  });
});

describe("stack staging: the self-hosted private network (Headscale)", () => {
  const values = () =>
    ofType(run, "kubernetes:helm.sh/v3:Release").find((r) => r.name === "platform")!.inputs.values as {
      headscale: {
        enabled: boolean;
        host: string;
        policy: string;
        database: { name: string };
        databaseSecret: string;
        secret: string;
        serviceAccount: { roleArn: string };
      };
    };

  it("when staging chooses Headscale, then the chart runs it on its own database and host with the fixed policy, and no tailnet policy is exported", () => {
    const headscale = values().headscale;
    expect(headscale).toMatchObject({
      enabled: true,
      host: "vpn.staging.example.com",
      database: { name: "headscale" },
      serviceAccount: { roleArn: "arn:aws:iam::123456789012:role/cgs-staging-headscale" },
    });
    expect(JSON.parse(headscale.policy)).toEqual(
      headscalePolicy({ tcpPorts: STREAMING_TCP_PORTS, udpPortRange: STREAMING_UDP_PORT_RANGE }),
    );
    expect(run.outputs.headscaleAclPolicy).toBe(headscale.policy);
    expect(run.outputs.tailnetAclPolicy).toBeUndefined();
    expect(run.outputs.privateNetworkLoginServer).toBe("https://vpn.staging.example.com");
    const certificates = ofType(run, "aws:acm/certificate:Certificate").map((c) => c.inputs.domainName);
    expect(certificates).toContain("vpn.staging.example.com");
  });

  it("when Headscale's secrets are made, then its noise key is generated once and only its own role reads it with its database password", () => {
    const version = ofType(run, "aws:secretsmanager/secretVersion:SecretVersion").find(
      (v) => v.name === "headscale",
    );
    const raw = version!.inputs.secretString as string | { value: string };
    const body = JSON.parse(typeof raw === "string" ? raw : raw.value) as Record<string, string>;
    expect(body.noisePrivateKey).toMatch(/^privkey:[0-9a-f]{64}$/);
    const readers = ofType(run, "aws:iam/rolePolicy:RolePolicy")
      .filter((p) => String(p.inputs.policy).includes("cgs-staging/headscale-"))
      .map((p) => p.inputs.role);
    expect(readers).toEqual(["role-headscale-id"]);
    const policy = inlinePolicyOf(run, "cgs-staging-headscale");
    expect(policy.flatMap((p) => p.Statement.flatMap((st) => st.Action)).sort()).toEqual([
      "secretsmanager:DescribeSecret",
      "secretsmanager:GetSecretValue",
    ]);
  });

  it("when sessions is configured, then it talks to the in-cluster Headscale, hands out its public login server, and reads the API key from its secret", () => {
    const sessions = platformValues(run).services.sessions!;
    expect(sessions.env).toMatchObject({
      PRIVATE_NETWORK: "headscale",
      HEADSCALE_URL: "http://cgs-headscale.cgs.svc:8080",
      HEADSCALE_LOGIN_SERVER: "https://vpn.staging.example.com",
    });
    expect(sessions.env.TAILSCALE_TAILNET).toBeUndefined();
    const keys = sessions.secrets.flatMap((s) => Object.entries(s.keys));
    expect(keys).toContainEqual(["HEADSCALE_API_KEY", "privateNetworkApiKey"]);
    expect(keys.map(([env]) => env)).not.toContain("TAILSCALE_API_KEY");
  });

  it(
    "when the chart is rendered with staging's values, then Headscale's Deployment, Ingress and NetworkPolicy are there",
    () => {
      const rendered = renderChartWithProgramValues(run);
      expect(rendered).toContain("name: cgs-headscale");
      expect(rendered).toContain('- host: "vpn.staging.example.com"');
      expect(rendered).toContain(
        'eks.amazonaws.com/role-arn: "arn:aws:iam::123456789012:role/cgs-staging-headscale"',
      );
    },
    15 * 60_000,
  );
});

describe("stack staging: capacity pools", () => {
  it("when sessions is configured, then it runs a small warm pool and at most one hot instance, with the idle cost of its instance type", () => {
    expect(platformValues(run).services.sessions?.env).toMatchObject({
      POOL_HOT_MIN: "0",
      POOL_HOT_MAX: "1",
      POOL_HOT_COVER_MINUTES: "2",
      POOL_WARM_MIN: "1",
      POOL_WARM_MAX: "3",
      POOL_WARM_COVER_MINUTES: "10",
      POOL_SHRINK_AFTER_MINUTES: "15",
      POOL_LAUNCH_TIMEOUT_MINUTES: "20",
      POOL_RUNNING_HOUR_COST: "59",
      POOL_STOPPED_HOUR_COST: "1",
      HOST_ASSIGN_PORT: "47991",
    });
  });
});
