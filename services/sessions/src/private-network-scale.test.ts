import {
  startHeadscale,
  startTailscaleNode,
  type RunningHeadscale,
  type TailscaleNode,
} from "@cgs/shared/testing/headscale";
import { waitUntil } from "@cgs/shared/testing/queue";
import { HeadscalePrivateNetwork } from "./adapters/headscale-private-network";

// The policy does not grow with the accounts: 1,000 accounts (each its own Headscale user, created through the
// adapter as a first key would) against a real Headscale, whose policy stays the same two rules, while two more
// accounts' real tailscaled nodes still see only their own. The hosted-Tailscale counterpart (1,000 accounts, no
// policy write) is in adapters/tailscale-private-network.test.ts.
let headscale: RunningHeadscale;
let adapter: HeadscalePrivateNetwork;
const nodes: TailscaleNode[] = [];

beforeAll(async () => {
  headscale = await startHeadscale();
  adapter = new HeadscalePrivateNetwork({
    apiUrl: headscale.url,
    apiKey: headscale.apiKey,
    timeoutMs: 30_000,
    loginServer: headscale.url,
  });
}, 1_800_000);

afterAll(async () => {
  await Promise.all(nodes.map((x) => x.stop()));
  await headscale?.stop();
});

async function joined(accountId: string, kind: "device" | "host", name: string) {
  const key = await adapter.createKey({ accountId, kind, expirySeconds: 600, description: name });
  const node = await startTailscaleNode(headscale.binDir, name);
  nodes.push(node);
  await node.join(key.key, adapter.loginServer);
  return node;
}

it("when 1,000 accounts are on the network, then Headscale enforces the same two-rule policy and each account's nodes see only each other", async () => {
  const policy = async () => (await headscale.api<{ policy: string }>("GET", "/api/v1/policy")).policy;
  const before = await policy();
  expect(JSON.parse(before).acls).toHaveLength(2);

  const crowd = Array.from({ length: 1_000 }, (_, i) => `scale-${Date.now().toString(36)}-${i}`);
  const started = Date.now();
  for (let i = 0; i < crowd.length; i += 8) {
    await Promise.all(crowd.slice(i, i + 8).map((acct) => adapter.ensureAccount(acct)));
  }
  console.log(`1,000 accounts (Headscale users) created in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  expect((await headscale.api<{ users: unknown[] }>("GET", "/api/v1/user")).users).toHaveLength(1_000);
  expect(await policy()).toBe(before);

  const [first, last] = [crowd[0]!, crowd.at(-1)!];
  const firstHost = await joined(first, "host", "first-host");
  const lastHost = await joined(last, "host", "last-host");
  const lastPhone = await joined(last, "device", "last-phone");
  const [firstHostIp, lastHostIp] = [(await firstHost.status()).ip, (await lastHost.status()).ip];
  await waitUntil(async () => (await lastPhone.status()).peers.some((p) => p.ip === lastHostIp), {
    timeoutMs: 20_000,
    description: "the last account's host in its phone's map",
  });
  expect((await lastPhone.status()).peers.map((p) => p.ip)).toEqual([lastHostIp]);
  expect((await firstHost.status()).peers).toEqual([]);
  expect(await lastPhone.tcp(firstHostIp, 47989)).toBeUndefined();
}, 900_000);
