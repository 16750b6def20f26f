import pino from "pino";
import { inArray } from "drizzle-orm";
import { outboxTable, type AnyEvent } from "@cgs/shared";
import { waitUntil } from "@cgs/shared/testing/queue";
import { buildAdapters, domainDepsFor } from "./composition";
import { sessionsTable } from "./data/session-tables";
import { serveQueue } from "./domain/queue";
import type { SessionsDomainDeps } from "./domain/session-deps";
import type { CloudProvider, LaunchRequest } from "./adapters/cloud-provider";
import { onCloud } from "./testing/on-cloud";
import { startSessionsHarness, type SessionsHarness } from "./testing/sessions-harness";

// Three simulated regions, each a fleet of its own with a latency beacon; near (eu-west-1) is the nearest.
const REGIONS = [
  { id: "us-east-1", name: "US East", simulator: { latencyMs: 60 } },
  { id: "eu-west-1", name: "Europe (Ireland)", simulator: { latencyMs: 10 } },
  { id: "ap-southeast-1", name: "Asia Pacific (Singapore)", simulator: { latencyMs: 150 } },
];

let h: SessionsHarness;
let n = 0;
const account = () => `acct-${Date.now().toString(36)}-${(n += 1)}`;
const region = (id: string) => h.regions.get(id)!;

beforeAll(async () => {
  h = await startSessionsHarness({ db: "postgres", env: { REGIONS: JSON.stringify(REGIONS) } });
});
afterAll(async () => {
  await h.close();
});
afterEach(async () => {
  expect(h.contractViolations).toEqual([]);
  for (const cloud of h.regions.values()) cloud.setCapacityExhausted(false);
});

async function stopAll(accounts: string[]) {
  for (const acct of accounts) await h.call(acct, "POST", "/api/v1/sessions/stop");
  await h.reconciler.tick();
}

describe("regions", () => {
  it("when a player lists the regions, then each has its beacon, which answers after the region's latency", async () => {
    const res = await h.call(account(), "GET", "/api/v1/regions");
    expect(res.status).toBe(200);
    expect(res.body.items.map((r: { id: string }) => r.id)).toEqual(REGIONS.map((r) => r.id));
    expect(res.body.items[1]).toMatchObject({ name: "Europe (Ireland)", available: true, queueLength: 0 });
    const rtt = async (url: string) => {
      const began = performance.now();
      const beacon = await fetch(url);
      expect(beacon.status).toBe(204);
      expect(beacon.headers.get("access-control-allow-origin")).toBe("*");
      return performance.now() - began;
    };
    const [us, eu, ap] = res.body.items as { beaconUrl: string }[];
    expect(await rtt(eu!.beaconUrl)).toBeLessThan(await rtt(us!.beaconUrl));
    expect(await rtt(ap!.beaconUrl)).toBeGreaterThanOrEqual(150);
  });

  it("when the first regions of a start's list are full, then it runs in the next one, in the order given", async () => {
    region("ap-southeast-1").setCapacityExhausted(true);
    region("us-east-1").setCapacityExhausted(true);
    const acct = account();
    const start = await h.call(acct, "POST", "/api/v1/sessions/start", {
      body: { regions: ["ap-southeast-1", "us-east-1", "eu-west-1"] },
    });
    expect(start.status).toBe(200);
    expect(start.body).toMatchObject({ state: "starting", region: "eu-west-1", queue: null });
    expect(region("eu-west-1").instance(start.body.instanceId)).toBeDefined();
    expect(region("us-east-1").instance(start.body.instanceId)).toBeUndefined();
    // The full regions are shown as such until the Retry-After passes.
    const listed = await h.call(acct, "GET", "/api/v1/regions");
    expect(listed.body.items.map((r: { available: boolean }) => r.available)).toEqual([false, true, false]);

    const other = account();
    region("ap-southeast-1").setCapacityExhausted(false);
    const second = await h.call(other, "POST", "/api/v1/sessions/start", {
      body: { regions: ["ap-southeast-1", "eu-west-1"] },
    });
    expect(second.body).toMatchObject({ state: "starting", region: "ap-southeast-1" });
    await stopAll([acct, other]);
  });

  it("when every region of the list is full and the player does not wait, then 503 CLOUD_CAPACITY names them and nothing is held", async () => {
    region("us-east-1").setCapacityExhausted(true);
    region("eu-west-1").setCapacityExhausted(true);
    const acct = account();
    const res = await h.call(acct, "POST", "/api/v1/sessions/start", {
      body: { regions: ["us-east-1", "eu-west-1"] },
    });
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({ error: "CLOUD_CAPACITY" });
    expect(res.body.message).toContain("us-east-1, eu-west-1");
    expect(res.headers.get("retry-after")).toBeTruthy();
    expect(h.billing.holds.filter((x) => x.accountId === acct).map((x) => x.released)).toEqual([true]);
    expect((await h.call(acct, "GET", "/api/v1/sessions/poll")).body.state).toBe("idle");
  });

  it("when a player starts with auto, then the lowest measured round trip within the bound wins, and the next nearest when it is full", async () => {
    const rttMs = { "us-east-1": 62, "eu-west-1": 18, "ap-southeast-1": 170 };
    const first = account();
    const near = await h.call(first, "POST", "/api/v1/sessions/start", {
      body: { region: "auto", rttMs, maxRttMs: 100 },
    });
    expect(near.body).toMatchObject({ state: "starting", region: "eu-west-1" });

    region("eu-west-1").setCapacityExhausted(true);
    const second = account();
    const next = await h.call(second, "POST", "/api/v1/sessions/start", {
      body: { region: "auto", rttMs, maxRttMs: 100 },
    });
    expect(next.body).toMatchObject({ state: "starting", region: "us-east-1" });

    // Beyond the bound is never chosen, even with everything within it full.
    region("us-east-1").setCapacityExhausted(true);
    const third = account();
    const none = await h.call(third, "POST", "/api/v1/sessions/start", {
      body: { region: "auto", rttMs, maxRttMs: 100 },
    });
    expect(none.status).toBe(503);
    expect(region("ap-southeast-1").instanceCount()).toBe(0);

    const tight = await h.call(third, "POST", "/api/v1/sessions/start", {
      body: { region: "auto", rttMs, maxRttMs: 10 },
    });
    expect(tight.status).toBe(400);
    expect(tight.body.message).toMatch(/maxRttMs 10 ms; the nearest measured is eu-west-1 at 18 ms/);
    await stopAll([first, second]);
  });

  it("when a start names a region this deployment does not offer, then 400 names the field and the regions offered", async () => {
    const acct = account();
    const one = await h.call(acct, "POST", "/api/v1/sessions/start", { body: { region: "sa-east-1" } });
    expect(one.status).toBe(400);
    expect(one.body.message).toMatch(/^region sa-east-1 is not offered; available: us-east-1, eu-west-1/);
    const list = await h.call(acct, "POST", "/api/v1/sessions/start", {
      body: { regions: ["eu-west-1", "xx-nowhere-9"] },
    });
    expect(list.status).toBe(400);
    expect(list.body.message).toMatch(/regions/);
    const both = await h.call(acct, "POST", "/api/v1/sessions/start", {
      body: { region: "eu-west-1", regions: ["eu-west-1"] },
    });
    expect(both.status).toBe(400);
  });
});

describe("the line when every region is full", () => {
  const waiting = ["us-east-1", "eu-west-1"];
  const events = async (accounts: string[]) => {
    const rows = await h.database.db.select().from(outboxTable);
    return rows.map((r) => r.payload as AnyEvent).filter((p) => accounts.includes(p.accountId));
  };
  const stateOf = async (ids: string[]) =>
    new Map(
      (
        await h.database.db
          .select({
            accountId: sessionsTable.accountId,
            state: sessionsTable.state,
            region: sessionsTable.region,
          })
          .from(sessionsTable)
          .where(inArray(sessionsTable.accountId, ids))
      ).map((r) => [r.accountId, r]),
    );

  it("when 50 players start at once into full regions and machines free one at a time, then they are served in the order they joined, nobody is charged while waiting, and the line survives a restart", async () => {
    for (const id of waiting) region(id).setCapacityExhausted(true);
    const players = Array.from({ length: 50 }, () => account());
    const joined = await Promise.all(
      players.map((acct) =>
        h.call(acct, "POST", "/api/v1/sessions/start", { body: { regions: waiting, queue: true } }),
      ),
    );
    expect(joined.map((r) => r.status)).toEqual(players.map(() => 200));
    expect(new Set(joined.map((r) => r.body.state))).toEqual(new Set(["queued"]));

    // Arrival order is the place each was given: 1..50, each once.
    const places = await Promise.all(
      players.map(async (acct) => (await h.call(acct, "GET", "/api/v1/sessions/poll")).body),
    );
    expect(places.map((p) => p.queue.position).sort((a, b) => a - b)).toEqual(players.map((_, i) => i + 1));
    for (const p of places) {
      expect(p).toMatchObject({ state: "queued", instanceId: null, region: null, ready: false });
      expect(p.queue.regions).toEqual(waiting);
      expect(p.queue.estimatedWaitSeconds).toBe(p.queue.position * 120);
      expect(p.message).toMatch(
        /^Waiting for a machine in US East or Europe \(Ireland\): \d+(st|nd|rd|th) in line, about \d+ min$/,
      );
    }
    const arrival = players
      .map((acct, i) => ({ acct, position: places[i]!.queue.position as number }))
      .sort((a, b) => a.position - b.position)
      .map((p) => p.acct);
    const regions = await h.call(players[0]!, "GET", "/api/v1/regions");
    expect(regions.body.items.slice(0, 2)).toEqual([
      expect.objectContaining({ id: "us-east-1", available: false, queueLength: 50 }),
      expect.objectContaining({ id: "eu-west-1", available: false, queueLength: 50 }),
    ]);
    // Nothing held, nothing metered while waiting: every hold given back, no session.started.
    expect(h.billing.holds.filter((x) => players.includes(x.accountId)).every((x) => x.released)).toBe(true);
    expect((await events(players)).filter((e) => e.type === "session.started")).toEqual([]);

    // A start without queue does not jump the line, even into a region that has room again.
    region("eu-west-1").setCapacityExhausted(false);
    const jumper = await h.call(account(), "POST", "/api/v1/sessions/start", {
      body: { regions: ["eu-west-1"] },
    });
    expect(jumper.status).toBe(503);

    // One machine at a time: eu-west-1 holds one instance; each served player plays, then stops.
    const simulator = region("eu-west-1");
    const served: string[] = [];
    let deps: SessionsDomainDeps = h.deps;
    const serve = async () => {
      await serveQueue(deps, waiting);
      const now = await stateOf(players);
      const starting = players.filter(
        (acct) => now.get(acct)!.state === "starting" && !served.includes(acct),
      );
      expect(starting).toHaveLength(1);
      served.push(starting[0]!);
      expect(now.get(starting[0]!)!.region).toBe("eu-west-1");
    };
    simulatorCapacity(simulator, 1);
    for (let i = 0; i < 25; i += 1) {
      await serve();
      // A second pass with the machine still taken admits nobody.
      await serveQueue(deps, waiting);
      expect([...(await stateOf(players)).values()].filter((r) => r.state === "starting")).toHaveLength(1);
      await h.reconciler.tick(); // running: metering starts only now
      await stopAll([served.at(-1)!]);
    }

    // The service restarts: nothing but the database and the cloud (which outlives it) is kept.
    const logger = pino({ level: "silent" });
    const fresh = buildAdapters(h.config, h.database.db, logger);
    deps = domainDepsFor(
      h.config,
      { ...fresh, regions: h.deps.regions, cloud: h.deps.cloud },
      h.database.db,
      logger,
    );
    const after = await h.call(arrival[25]!, "GET", "/api/v1/sessions/poll");
    expect(after.body.queue.position).toBe(1);
    for (let i = 25; i < 50; i += 1) {
      await serve();
      await h.reconciler.tick();
      await stopAll([served.at(-1)!]);
    }
    await fresh.simulator?.close();

    expect(served).toEqual(arrival);
    // Each was metered from when its machine ran, never from when it joined the line.
    const started = (await events(players)).filter((e) => e.type === "session.started");
    expect(started).toHaveLength(50);
  });

  it("when a queued player leaves the line, then the session ends stopped with nothing charged and those behind move up", async () => {
    for (const id of waiting) region(id).setCapacityExhausted(true);
    const [first, second] = [account(), account()];
    for (const acct of [first, second]) {
      const res = await h.call(acct, "POST", "/api/v1/sessions/start", {
        body: { regions: waiting, queue: true },
      });
      expect(res.body.state).toBe("queued");
    }
    expect((await h.call(second, "GET", "/api/v1/sessions/poll")).body.queue.position).toBe(2);
    const left = await h.call(first, "POST", "/api/v1/sessions/stop");
    expect(left.status).toBe(200);
    expect(left.body).toMatchObject({
      state: "stopped",
      stopReason: "user",
      message: "Left the line; nothing was charged.",
    });
    expect((await h.call(second, "GET", "/api/v1/sessions/poll")).body.queue.position).toBe(1);
    // A queued session is the account's one session: another start waits until it leaves the line.
    expect((await h.call(second, "POST", "/api/v1/sessions/start", { body: {} })).status).toBe(409);
    await h.call(second, "POST", "/api/v1/sessions/stop");
  });

  it("when a machine is being tried for the first in line, then the player still sees the line, and leaving it then ends the session at once", async () => {
    region("us-east-1").setCapacityExhausted(true);
    const acct = account();
    await h.call(acct, "POST", "/api/v1/sessions/start", { body: { regions: ["us-east-1"], queue: true } });
    // The region's launch is held until the player has left, then finds the region still full.
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const full = region("us-east-1");
    const held: CloudProvider = Object.assign(Object.create(full) as CloudProvider, {
      launchInstance: async (request: LaunchRequest) => {
        await gate;
        return full.launchInstance(request);
      },
    });
    const serving = serveQueue(onCloud(h.deps, held), ["us-east-1"]);
    await waitUntil(async () => (await stateOf([acct])).get(acct)?.state === "starting", {
      intervalMs: 20,
      description: "the queue pass to take the session out of the line",
    });
    const seen = (await h.call(acct, "GET", "/api/v1/sessions/poll")).body;
    expect(seen).toMatchObject({ state: "queued", startedAt: null, region: null, queue: { position: 1 } });
    const stopping = h.call(acct, "POST", "/api/v1/sessions/stop");
    await new Promise((resolve) => setTimeout(resolve, 200));
    release();
    await serving;
    // The answer waits for the pass to end it, as any queued session's stop answers stopped.
    expect((await stopping).body).toMatchObject({ state: "stopped" });
    expect((await h.call(acct, "GET", "/api/v1/sessions/poll")).body).toMatchObject({ state: "stopped" });
  });

  it("when a queued player waited longer than the service allows, then the session fails saying so, uncharged", async () => {
    for (const id of waiting) region(id).setCapacityExhausted(true);
    const acct = account();
    await h.call(acct, "POST", "/api/v1/sessions/start", { body: { regions: waiting, queue: true } });
    const impatient = {
      ...h.deps,
      settings: { ...h.deps.settings, queue: { ...h.deps.settings.queue, maxWaitMs: 0 } },
    };
    const report = await serveQueue(impatient, []);
    expect(report.expired).toBeGreaterThanOrEqual(1);
    const poll = (await h.call(acct, "GET", "/api/v1/sessions/poll")).body;
    expect(poll).toMatchObject({ state: "failed", queue: null });
    expect(poll.message).toMatch(
      /^No machine freed within 0 min in US East or Europe \(Ireland\); nothing was charged/,
    );
  });
});

/** The simulated region holds at most `capacity` instances from now on (and is no longer told it is full). */
function simulatorCapacity(cloud: ReturnType<typeof region>, capacity: number) {
  cloud.setCapacityExhausted(false);
  cloud.setCapacity(capacity);
}
