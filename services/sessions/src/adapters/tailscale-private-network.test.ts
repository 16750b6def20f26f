import { randomUUID } from "node:crypto";
import {
  STREAMING_TCP_PORTS,
  STREAMING_UDP_PORT_RANGE,
  slotTag,
  systemClock,
  tailnetPolicy,
} from "@cgs/shared";
import { openTestDatabase, type OpenedTestDatabase } from "@cgs/shared/testing/db";
import { eq } from "drizzle-orm";
import { slotLeases } from "../composition";
import { mintAccountKey, purgeAccountNetwork } from "../domain/private-network-keys";
import * as schema from "../data/schema";
import { sessionsTable } from "../data/session-tables";
import { migrationsFolder } from "../testing/sessions-harness";
import { startTailscaleStandIn, type TailscaleStandIn } from "../testing/streaming-stand-ins";
import { CloudCapacityError } from "./cloud-provider";
import { TailscalePrivateNetwork } from "./tailscale-private-network";

// Hosted Tailscale cannot run here, so its adapter runs against a Tailscale-API-shaped stand-in (the isolation
// itself is proven on a real Headscale in private-network-headscale.test.ts); the slot leases are real, in the
// sessions database.
const SLOTS = 3;
const policyArgs = {
  sessionsTag: "tag:cgs-sessions",
  clientTag: "tag:cgs-client",
  hostTag: "tag:cgs-host",
  slots: SLOTS,
  tcpPorts: STREAMING_TCP_PORTS,
  udpPortRange: STREAMING_UDP_PORT_RANGE,
};

let database: OpenedTestDatabase<typeof schema>;
let tailscale: TailscaleStandIn;
let network: TailscalePrivateNetwork;

function adapter(slots = SLOTS): TailscalePrivateNetwork {
  return new TailscalePrivateNetwork(
    {
      apiUrl: tailscale.url,
      tailnet: "example.com",
      apiKey: "tskey-api-test",
      timeoutMs: 2_000,
      deviceTags: ["tag:cgs-client"],
      hostTag: "tag:cgs-host",
      devicesCacheMs: 0,
    },
    slotLeases(database.db, slots),
  );
}

beforeEach(async () => {
  database = await openTestDatabase("pglite", "sessions", { schema, migrationsFolder });
  tailscale = await startTailscaleStandIn({ apiKey: "tskey-api-test", policy: tailnetPolicy(policyArgs) });
  network = adapter();
});
afterEach(async () => {
  await tailscale.close();
  await database.destroy();
});

let n = 0;
/** An account with a running session (a slot held by it cannot be taken). */
async function playing(): Promise<string> {
  const accountId = `ts-${(n += 1)}`;
  await database.db.insert(sessionsTable).values({
    id: randomUUID(),
    accountId,
    state: "running",
    region: "us-east-1",
    ratePerMinute: 10,
    currency: "USD",
    idleTimeoutMinutes: 15,
  });
  return accountId;
}

const stopPlaying = (accountId: string) =>
  database.db.update(sessionsTable).set({ state: "stopped" }).where(eq(sessionsTable.accountId, accountId));

/** A key minted the way the service mints it (recorded in the sessions database), through the adapter under test. */
const key = (accountId: string, kind: "device" | "host" = "device", through = network) =>
  mintAccountKey(
    { privateNetwork: through, db: database.db, clock: systemClock },
    { accountId, kind, expirySeconds: 600, description: "cgs-session-1234" },
  );

const createTags = (i: number) =>
  (tailscale.keys[i]!.body as { capabilities: { devices: { create: { tags: string[] } } } }).capabilities
    .devices.create.tags;

describe("TailscalePrivateNetwork over the Tailscale API", () => {
  it("when a device key is asked for, then it posts a single-use, ephemeral, pre-authorized key with the client tag and the account's slot tag", async () => {
    const before = Date.now();
    const minted = await key(await playing());
    expect(minted.key).toMatch(/^tskey-auth-/);
    expect(minted.expiresAt.getTime()).toBeGreaterThanOrEqual(before + 599_000);
    expect(tailscale.keys).toEqual([
      {
        tailnet: "example.com",
        body: {
          capabilities: {
            devices: {
              create: {
                reusable: false,
                ephemeral: true,
                preauthorized: true,
                tags: ["tag:cgs-client", slotTag(0)],
              },
            },
          },
          expirySeconds: 600,
          description: "cgs-session-1234",
        },
      },
    ]);
  });

  it("when two accounts play, then each holds its own slot tag for its devices and its host, and the policy is never written", async () => {
    const [a, b] = [await playing(), await playing()];
    await key(a, "host");
    await key(b, "host");
    await key(a);
    await key(b);
    expect([createTags(0), createTags(1), createTags(2), createTags(3)]).toEqual([
      ["tag:cgs-host", slotTag(0)],
      ["tag:cgs-host", slotTag(1)],
      ["tag:cgs-client", slotTag(0)],
      ["tag:cgs-client", slotTag(1)],
    ]);
    expect(tailscale.requests.filter((r) => r.path.endsWith("/acl"))).toEqual([]);
    expect(tailscale.policy).toEqual(tailnetPolicy(policyArgs));
  });

  it("when every slot is held by a playing account, then another account's key is refused as a capacity error; once one stops, its devices and keys are removed before its slot is reused", async () => {
    const [a, b, c] = [await playing(), await playing(), await playing()];
    for (const acct of [a, b, c]) await key(acct, "host");
    const aDevice = tailscale.join((await key(a)).key);
    const aUnused = await key(a);
    const d = await playing();
    await expect(key(d)).rejects.toBeInstanceOf(CloudCapacityError);

    await stopPlaying(a);
    await key(d);
    expect(createTags(tailscale.keys.length - 1)).toEqual(["tag:cgs-client", slotTag(0)]);
    expect(tailscale.devices.map((x) => x.id)).not.toContain(aDevice.id);
    expect(() => tailscale.join(aUnused.key)).toThrow(/invalid key/);
  });

  it("when keys are looked up, then a key a device joined with counts as used and one still waiting does not", async () => {
    const acct = await playing();
    const [used, waiting] = [await key(acct), await key(acct)];
    tailscale.join(used.key);
    expect(await network.usedKeys(acct, [used.id, waiting.id])).toEqual(new Set([used.id]));
    const lookups = tailscale.requests.filter((r) => r.method === "GET" && r.path.includes("/keys/"));
    expect(lookups.map((r) => r.path.split("/").at(-1))).toEqual([used.id, waiting.id]);
  });

  it("when the account's device is online, then presence says so; its host does not count", async () => {
    const acct = await playing();
    expect(await network.devicePresence(acct)).toEqual({ online: false, lastSeenAt: null, devices: 0 });
    tailscale.join((await key(acct, "host")).key);
    expect(await network.devicePresence(acct)).toMatchObject({ online: false, devices: 0 });
    const phone = tailscale.join((await key(acct)).key);
    expect(await network.devicePresence(acct)).toMatchObject({ online: true, devices: 1 });
    phone.connectedToControl = false;
    phone.lastSeen = "2030-01-02T03:04:05.000Z";
    expect(await network.devicePresence(acct)).toEqual({
      online: false,
      lastSeenAt: new Date("2030-01-02T03:04:05.000Z"),
      devices: 1,
    });
  });

  it("when an account is purged, then its devices and keys are deleted, and once its session ended its slot serves another account", async () => {
    const [acct, other] = [await playing(), await playing()];
    const host = await key(acct, "host");
    tailscale.join(host.key);
    const waiting = await key(acct);
    const otherDevice = tailscale.join((await key(other)).key);
    await database.db.transaction((tx) => purgeAccountNetwork(network, tx, acct));
    expect(tailscale.devices).toEqual([otherDevice]);
    expect(() => tailscale.join(waiting.key)).toThrow(/invalid key/);
    await stopPlaying(acct);
    const [third, fourth] = [await playing(), await playing()];
    await key(third);
    await key(fourth);
    expect(createTags(tailscale.keys.length - 1)).toEqual(["tag:cgs-client", slotTag(0)]);
  });

  it("when the API key is refused, then key creation fails", async () => {
    const wrong = new TailscalePrivateNetwork(
      {
        apiUrl: tailscale.url,
        tailnet: "-",
        apiKey: "wrong",
        timeoutMs: 2_000,
        deviceTags: ["tag:cgs-client"],
        hostTag: "tag:cgs-host",
        devicesCacheMs: 0,
      },
      slotLeases(database.db, SLOTS),
    );
    await expect(
      wrong.createKey({ accountId: await playing(), kind: "device", expirySeconds: 60, description: "d" }),
    ).rejects.toThrow(/401/);
  });

  it("when 1,000 accounts play, then the policy keeps its fixed size: no write, and every key carries one of the pool's slot tags", async () => {
    const pool = 1_000;
    const big = adapter(pool);
    const before = JSON.stringify(tailscale.policy);
    const accounts = await Promise.all(Array.from({ length: pool }, () => playing()));
    for (const acct of accounts) await key(acct, "device", big);
    expect(tailscale.requests.filter((r) => r.path.endsWith("/acl"))).toEqual([]);
    expect(JSON.stringify(tailscale.policy)).toBe(before);
    const slotTags = new Set(tailscale.keys.map((_, i) => createTags(i)[1]));
    expect(slotTags.size).toBe(pool);
  }, 120_000);
});
