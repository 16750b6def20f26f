import { startTailscaleStandIn, type TailscaleStandIn } from "../testing/streaming-stand-ins";
import {
  ACCOUNT_TAG_PREFIX,
  STREAMING_TCP_PORTS,
  STREAMING_UDP_PORT_RANGE,
  accountNetworkTag,
  tailnetPolicy,
  type TailnetPolicy,
} from "@cgs/shared";
import { TailscalePrivateNetwork, type TailscaleSettings } from "./private-network";

const ports = { tcpPorts: STREAMING_TCP_PORTS, udpPortRange: STREAMING_UDP_PORT_RANGE };
const policyArgs = {
  sessionsTag: "tag:cgs-sessions",
  clientTag: "tag:cgs-client",
  hostTag: "tag:cgs-host",
  accountTagPrefix: ACCOUNT_TAG_PREFIX,
  ...ports,
};
const tailscaleSettings = { ownerTag: "tag:cgs-sessions", ports, timeoutMs: 2_000 };

/** A Tailscale stand-in holding infra's base policy, and adapter settings pointing at it. */
async function withPolicyStandIn(
  run: (tailscale: TailscaleStandIn, settings: TailscaleSettings) => Promise<void>,
): Promise<void> {
  const tailscale = await startTailscaleStandIn({ apiKey: "k", policy: tailnetPolicy(policyArgs) });
  try {
    await run(tailscale, {
      ...tailscaleSettings,
      apiUrl: tailscale.url,
      tailnet: "example.com",
      apiKey: "k",
    });
  } finally {
    await tailscale.close();
  }
}

describe("TailscalePrivateNetwork over HTTP", () => {
  it("when a key is asked for, then it posts a single-use, ephemeral, pre-authorized, tagged key request with its expiry", async () => {
    const tailscale = await startTailscaleStandIn({ apiKey: "tskey-api-test" });
    try {
      const network = new TailscalePrivateNetwork({
        ...tailscaleSettings,
        apiUrl: tailscale.url,
        tailnet: "example.com",
        apiKey: "tskey-api-test",
      });
      const before = Date.now();
      const key = await network.createAuthKey({
        tags: ["tag:cgs-client"],
        expirySeconds: 600,
        description: "cgs-session-1234",
      });
      expect(key.key).toMatch(/^tskey-auth-/);
      expect(key.expiresAt.getTime()).toBeGreaterThanOrEqual(before + 599_000);
      expect(tailscale.keys).toEqual([
        {
          tailnet: "example.com",
          body: {
            capabilities: {
              devices: {
                create: { reusable: false, ephemeral: true, preauthorized: true, tags: ["tag:cgs-client"] },
              },
            },
            expirySeconds: 600,
            description: "cgs-session-1234",
          },
        },
      ]);
    } finally {
      await tailscale.close();
    }
  });

  it("when an account's live keys are listed, then only unexpired keys carrying its tag count", async () => {
    const tailscale = await startTailscaleStandIn({ apiKey: "tskey-api-test" });
    try {
      const settings = { ...tailscaleSettings, tailnet: "-", apiKey: "tskey-api-test" };
      const network = new TailscalePrivateNetwork({ ...settings, apiUrl: tailscale.url });
      const mint = (tags: string[]) => network.createAuthKey({ tags, expirySeconds: 600, description: "d" });
      await mint(["tag:cgs-client", "tag:cgs-acct-aaaa"]);
      await mint(["tag:cgs-client", "tag:cgs-acct-aaaa"]);
      await mint(["tag:cgs-client", "tag:cgs-acct-bbbb"]);
      expect(await network.liveKeys("tag:cgs-acct-aaaa")).toHaveLength(2);
      expect(await network.liveKeys("tag:cgs-acct-bbbb")).toHaveLength(1);
      expect(await network.liveKeys("tag:cgs-acct-cccc")).toEqual([]);
    } finally {
      await tailscale.close();
    }
  });

  it("when the API key is refused, then key creation fails", async () => {
    const tailscale = await startTailscaleStandIn({ apiKey: "right" });
    try {
      const network = new TailscalePrivateNetwork({
        apiUrl: tailscale.url,
        ...tailscaleSettings,
        tailnet: "-",
        apiKey: "wrong",
      });
      await expect(
        network.createAuthKey({ tags: ["tag:x"], expirySeconds: 60, description: "d" }),
      ).rejects.toThrow(/401/);
    } finally {
      await tailscale.close();
    }
  });

  it("when an account's access is ensured, then its tag owner and rules are added to the policy once, and again is a no-op", () =>
    withPolicyStandIn(async (tailscale, settings) => {
      const network = new TailscalePrivateNetwork(settings);
      const tag = accountNetworkTag("acct-ensure");
      await network.ensureAccountAccess(tag);
      await network.ensureAccountAccess(tag);
      const policy = tailscale.policy as TailnetPolicy;
      expect(policy.tagOwners[tag]).toEqual(["tag:cgs-sessions"]);
      expect(policy.acls.filter((r) => r.src.includes(tag))).toHaveLength(2);
      expect(policy.tests).toEqual(tailnetPolicy(policyArgs).tests);
      const writes = () => tailscale.requests.filter((r) => r.method === "POST" && r.path.endsWith("/acl"));
      expect(writes()).toHaveLength(1);
      expect(writes()[0]!.headers["if-match"]).toBe('"v1"');
      // Another replica (no cache) reads the policy, finds the rules and writes nothing.
      await new TailscalePrivateNetwork(settings).ensureAccountAccess(tag);
      expect(writes()).toHaveLength(1);
    }));

  it("when two replicas ensure two accounts on the same stale ETag, then one write is refused with 412, re-read and retried, and both rules end in the policy", () =>
    withPolicyStandIn(async (tailscale, settings) => {
      const [a, b] = [accountNetworkTag("acct-race-a"), accountNetworkTag("acct-race-b")];
      tailscale.readBarrier = 2;
      await Promise.all([
        new TailscalePrivateNetwork(settings).ensureAccountAccess(a),
        new TailscalePrivateNetwork(settings).ensureAccountAccess(b),
      ]);
      const policy = tailscale.policy as TailnetPolicy;
      expect(Object.keys(policy.tagOwners)).toEqual(expect.arrayContaining([a, b]));
      expect(policy.acls.filter((r) => r.src.includes(a) || r.src.includes(b))).toHaveLength(4);
      const ifMatches = tailscale.requests
        .filter((r) => r.method === "POST" && r.path.endsWith("/acl"))
        .map((r) => r.headers["if-match"]);
      expect(ifMatches).toEqual(['"v1"', '"v1"', '"v2"']);
    }));

  it("when accounts A and B have their rules, then the policy's own tests hold and B's rules never let A's tag in", () =>
    withPolicyStandIn(async (tailscale, settings) => {
      const network = new TailscalePrivateNetwork(settings);
      const [a, b] = [accountNetworkTag("acct-a"), accountNetworkTag("acct-b")];
      await network.ensureAccountAccess(a);
      await network.ensureAccountAccess(b);
      const policy = tailscale.policy as TailnetPolicy;
      // Tailscale's reading of a rule for these entries: the source tag listed, the destination port listed.
      const accepts = (src: string, dst: string) =>
        policy.acls.some((r) => r.src.includes(src) && r.dst.includes(dst));
      const port = STREAMING_TCP_PORTS[0]!;
      const tests = [
        ...policy.tests,
        { src: a, accept: [`${a}:${port}`], deny: [`${b}:${port}`] },
        { src: b, accept: [`${b}:${port}`], deny: [`${a}:${port}`] },
      ];
      for (const test of tests) {
        for (const dst of test.accept ?? [])
          expect([test.src, dst, accepts(test.src, dst)]).toEqual([test.src, dst, true]);
        for (const dst of test.deny ?? [])
          expect([test.src, dst, accepts(test.src, dst)]).toEqual([test.src, dst, false]);
      }
      const fromB = policy.acls.filter((r) => r.dst.some((d) => d.startsWith(`${b}:`)));
      expect(fromB.flatMap((r) => r.src)).toEqual([b, b]);
    }));
});
