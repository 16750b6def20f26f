import { ofType, runStack, type StackRun } from "./testing/stack-harness";
import { platformValues } from "./testing/stack-invariants";
import { accountRules, tailnetPolicy, type TailnetPolicy } from "@cgs/shared";

// One player, one host, as the infrastructure states it: the prod stack through Pulumi mocks.
let run: StackRun;
beforeAll(async () => {
  run = await runStack("prod");
}, 120_000);

interface Rule {
  protocol: string;
  fromPort: number;
  toPort: number;
  cidrBlocks?: string[];
  securityGroups?: string[];
  description?: string;
}

function streamingIngress(): Rule[] {
  const sg = ofType(run, "aws:ec2/securityGroup:SecurityGroup").find((r) => r.name === "streaming-sg");
  expect(sg).toBeDefined();
  return sg!.inputs.ingress as Rule[];
}

describe("streaming fleet network rules", () => {
  it("when the stack is built, then the host API port admits only the cluster's security group (where sessions runs), never a CIDR", () => {
    const api = streamingIngress().filter((r) => r.fromPort <= 47990 && r.toPort >= 47990);
    expect(api).toHaveLength(1);
    expect(api[0]!.securityGroups).toEqual(["sg-cluster"]);
    expect(api[0]!.cidrBlocks ?? []).toEqual([]);
  });

  it("when the stack is built, then every streaming port admits only the private network, never 0.0.0.0/0", () => {
    const streaming = streamingIngress().filter((r) => !(r.fromPort <= 47990 && r.toPort >= 47990));
    expect(streaming.length).toBeGreaterThan(0);
    for (const rule of streaming) {
      expect(rule.cidrBlocks).toEqual(["100.64.0.0/10"]);
      expect(rule.securityGroups ?? []).toEqual([]);
    }
    const all = streamingIngress().flatMap((r) => r.cidrBlocks ?? []);
    expect(all).not.toContain("0.0.0.0/0");
    expect(all).not.toContain("::/0");
  });

  it("when the sessions secret is built, then it carries a generated sealing key and no shared streaming-host password", () => {
    const versions = ofType(run, "aws:secretsmanager/secretVersion:SecretVersion");
    const streaming = versions.find((v) => v.name.endsWith("-streaming"));
    const raw = streaming!.inputs.secretString as string | { value: string };
    const body = JSON.parse(typeof raw === "string" ? raw : raw.value) as Record<string, string>;
    expect(Object.keys(body).sort()).toEqual(["pinHashSecret", "streamingCredentialsKey", "tailscaleApiKey"]);
    expect(Buffer.from(body.streamingCredentialsKey!, "base64")).toHaveLength(32);
  });
});

describe("gateway rate limits while Redis is down", () => {
  it("when the stack is built, then the gateway knows its replica floor so each replica's fallback share is limit / replicas", () => {
    const values = platformValues(run);
    const gateway = values.services.gateway;
    expect(gateway?.env?.GATEWAY_REPLICAS).toBe(String(gateway?.replicas));
  });
});

describe("tailnet ACL policy", () => {
  const args = {
    sessionsTag: "tag:cgs-sessions",
    clientTag: "tag:cgs-client",
    hostTag: "tag:cgs-host",
    accountTagPrefix: "tag:cgs-acct-",
    tcpPorts: [47984, 47989, 48010],
    udpPortRange: { from: 47998, to: 48010 },
  };

  it("when the stack exports the policy, then no rule lets the shared client tag reach anything and each account tag reaches only itself", () => {
    const policy = JSON.parse(String(run.outputs.tailnetAclPolicy)) as TailnetPolicy;
    for (const rule of policy.acls) {
      expect(rule.src).toHaveLength(1);
      expect(rule.src[0]).toMatch(/^tag:cgs-acct-[0-9a-f]{16}$/);
      for (const dst of rule.dst) expect(dst.startsWith(`${rule.src[0]}:`)).toBe(true);
    }
    expect(policy.acls.some((r) => r.src.includes("tag:cgs-client") || r.src.includes("*"))).toBe(false);
    expect(policy.tagOwners["tag:cgs-client"]).toEqual(["tag:cgs-sessions"]);
    expect(policy.tests.find((t) => t.src === "tag:cgs-client")?.deny?.length).toBeGreaterThan(0);
  });

  it("when account A's rules are generated, then they open A's streaming ports to A and nothing of B's", () => {
    const a = "tag:cgs-acct-aaaaaaaaaaaaaaaa";
    const b = "tag:cgs-acct-bbbbbbbbbbbbbbbb";
    const policy = tailnetPolicy(args, [a, b]);
    const fromA = policy.acls.filter((r) => r.src.includes(a)).flatMap((r) => r.dst);
    expect(fromA).toEqual(accountRules(a, args).flatMap((r) => r.dst));
    expect(fromA.some((d) => d.startsWith(b))).toBe(false);
    expect(fromA).toContain(`${a}:47989`);
    expect(fromA).not.toContain(`${a}:47990`);
  });
});
