import { eq } from "drizzle-orm";
import { accountNetworkTag, metrics } from "@cgs/shared";
import { listPool } from "./data/pool-repository";
import type { PoolInstanceRow } from "./data/pool-tables";
import { sessionsTable } from "./data/session-tables";
import type { SessionStatus } from "./domain/session-status";
import { startSessionsHarness, type SessionsHarness } from "./testing/sessions-harness";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let n = 0;
const account = () => `pool-${Date.now().toString(36)}-${(n += 1)}`;

/** Waits (polling) for `check` to hold; fails with what was last seen. */
async function eventually<T>(what: string, read: () => Promise<T>, check: (v: T) => boolean, ms = 15_000) {
  const deadline = Date.now() + ms;
  let last: T = await read();
  while (!check(last)) {
    if (Date.now() > deadline) throw new Error(`${what}: still ${JSON.stringify(last)}`);
    await sleep(50);
    last = await read();
  }
  return last;
}

// Capacity pools on the simulators, end to end: every pool instance runs the host agent's real code, which waits in
// standby and reports over SQS (moto) signed with its slot's key; the pool keeper, the starts, the reconciler and
// the assignment all run for real. The simulator's delays: a cold launch 1.5 s, a stopped instance started 300 ms,
// Sunshine up 200 ms after the host has its session and its volume.
describe("capacity pools: a start takes the fastest machine there is", () => {
  let h: SessionsHarness;
  const az = () => h.deps.settings.availabilityZone;
  const pool = () => listPool(h.database.db, az());
  const inState = (rows: PoolInstanceRow[], state: string) => rows.filter((r) => r.state === state);

  beforeAll(async () => {
    h = await startSessionsHarness({
      workers: true,
      hostAgents: true,
      bootDelayMs: 1_500,
      hostReadyDelayMs: 200,
      env: {
        POOL_HOT_MIN: "1",
        POOL_HOT_MAX: "1",
        POOL_WARM_MIN: "1",
        POOL_WARM_MAX: "1",
        POOL_INTERVAL_MS: "500",
        POOL_SHRINK_AFTER_MINUTES: "0",
        SIMULATOR_START_DELAY_MS: "300",
        SIMULATOR_STOP_DELAY_MS: "100",
        SIMULATOR_AGENT_REPORT_INTERVAL_MS: "200",
        START_ESTIMATE_HOT_SECONDS: "8",
        START_ESTIMATE_WARM_SECONDS: "30",
      },
    });
  });
  afterAll(async () => {
    await h.close();
  });
  afterEach(() => expect(h.contractViolations).toEqual([]));

  /** One hot instance up and waiting, one warm instance parked. */
  const poolFull = () =>
    eventually(
      "pool filled",
      pool,
      (rows) => inState(rows, "hot").length === 1 && inState(rows, "warm").length === 1 && rows.length === 2,
      30_000,
    );

  const poll = async (acct: string): Promise<SessionStatus> =>
    (await h.call(acct, "GET", "/api/v1/sessions/poll", { direct: true })).body;

  const ready = (acct: string) =>
    eventually(
      "session ready",
      () => poll(acct),
      (s) => s.state === "running" && s.ready,
    );

  const sessionRow = async (acct: string) =>
    (await h.database.db.select().from(sessionsTable).where(eq(sessionsTable.accountId, acct)))[0]!;

  const stop = async (acct: string) => {
    expect((await h.call(acct, "POST", "/api/v1/sessions/stop")).status).toBe(200);
    await eventually(
      "stopped",
      () => poll(acct),
      (s) => s.state === "stopped",
    );
  };

  it("when the pool is full and a player starts, then the session runs on the hot instance, says so, and the pool refills", async () => {
    const [hot] = inState(await poolFull(), "hot");
    const acct = account();
    const start = await h.call(acct, "POST", "/api/v1/sessions/start");
    expect(start.status).toBe(200);
    expect(start.body.instanceId).toBe(hot!.instanceId);
    expect(start.body.message).toMatch(/^Preparing a machine that is already running, about \d+ s$/);
    const running = await ready(acct);
    expect(running.instanceId).toBe(hot!.instanceId);
    expect(await sessionRow(acct)).toMatchObject({ capacity: "hot", poolId: hot!.id });
    // The claimed instance left the pool for good; a new one takes its place.
    const refilled = await poolFull();
    expect(refilled.map((r) => r.instanceId)).not.toContain(hot!.instanceId);
    await stop(acct);
  });

  it("when two players start at once, then one gets the hot instance and the other the warm one, started for them", async () => {
    const [warm] = inState(await poolFull(), "warm");
    const players = [account(), account()];
    const starts = await Promise.all(players.map((p) => h.call(p, "POST", "/api/v1/sessions/start")));
    const second = players[starts.findIndex((s) => s.body.instanceId === warm!.instanceId)]!;
    const onWarm = starts.find((s) => s.body.instanceId === warm!.instanceId)!;
    expect(onWarm.body.message).toMatch(/^Starting a warm machine, about \d+ s$/);
    await ready(second);
    expect(await sessionRow(second)).toMatchObject({ capacity: "warm", poolId: warm!.id });
    await Promise.all(players.map(stop));
  });

  it("when more players start at once than the pool holds, then each gets a different machine: hot, warm, then new launches", async () => {
    await poolFull();
    const misses = (await metrics.poolClaimMisses.get()).values[0]?.value ?? 0;
    const players = [account(), account(), account(), account()];
    const starts = await Promise.all(players.map((p) => h.call(p, "POST", "/api/v1/sessions/start")));
    expect(starts.map((s) => s.status)).toEqual([200, 200, 200, 200]);
    expect(new Set(starts.map((s) => s.body.instanceId)).size).toBe(4);
    const capacities = (await Promise.all(players.map(sessionRow))).map((r) => r.capacity).sort();
    expect(capacities).toEqual(["cold", "cold", "hot", "warm"]);
    expect((await metrics.poolClaimMisses.get()).values[0]?.value).toBe(misses + 2);
    await Promise.all(players.map(ready));
    await Promise.all(players.map(stop));
  });

  it("when a player stops and the next player takes a pool machine, then nothing of the first player is on it: credentials, volume, pairings, network identity", async () => {
    await poolFull();
    const alice = account();
    const bob = account();
    // Alice plays on a pool machine and pairs her phone.
    await h.call(alice, "POST", "/api/v1/sessions/start");
    const aliceRunning = await ready(alice);
    const aliceRow = await sessionRow(alice);
    expect(aliceRow.capacity).toBe("hot");
    expect(
      (await h.call(alice, "POST", "/api/v1/sessions/pair", { body: { deviceName: "alice-phone" } })).status,
    ).toBe(200);
    expect(h.streamingHost.completePairing(aliceRunning.privateNetIp!)).toMatchObject({
      name: "alice-phone",
    });
    await stop(alice);
    // Her machine is terminated, never parked or handed on.
    await eventually(
      "alice's machine terminated",
      async () => h.cloud.instance(aliceRow.instanceId!)?.state,
      (s) => s === "terminated",
    );

    await poolFull();
    await h.call(bob, "POST", "/api/v1/sessions/start");
    const bobRunning = await ready(bob);
    const bobRow = await sessionRow(bob);
    expect(bobRow.capacity).toBe("hot");
    expect(bobRunning.instanceId).not.toBe(aliceRow.instanceId);
    const ip = bobRunning.privateNetIp!;
    // Credentials: the host accepts Bob's session's credentials, not Alice's.
    expect(await h.streamingHost.isReady(ip, bobRow.id)).toBe(true);
    expect(await h.streamingHost.isReady(ip, aliceRow.id)).toBe(false);
    // Volume: only Bob's is attached to his machine; Sunshine's client list there is Bob's (empty), not Alice's.
    const attached = [...h.cloud.volumes.values()].filter((v) => v.attachedTo === bobRunning.instanceId);
    expect(attached.map((v) => v.accountId)).toEqual([bob]);
    expect(h.cloud.hostClientsAt(ip)).toEqual([]);
    expect((await h.call(bob, "GET", "/api/v1/devices")).body.items).toEqual([]);
    // Network identity: the machine joins with a key of Bob's account, and is tagged as his.
    const assignment = h.cloud.hosts!.assignmentOf(bobRunning.instanceId!);
    expect(assignment?.sessionId).toBe(bobRow.id);
    expect(h.privateNetwork.join(assignment!.privateNetworkKey!).accountId).toBe(bob);
    expect(h.cloud.hostTags(ip)).toEqual([accountNetworkTag(bob)]);
    await stop(bob);
  });

  it("when an instance carries a pool tag but belongs to no slot and no session, then the pool keeper terminates it", async () => {
    await poolFull();
    const { instanceId } = await h.cloud.launchPoolInstance({
      poolId: "00000000-0000-4000-8000-00000000dead",
      availabilityZone: az(),
    });
    await eventually(
      "orphan terminated",
      async () => h.cloud.instance(instanceId)?.state,
      (s) => s === "terminated",
    );
    // The pool's own instances are untouched.
    expect((await pool()).every((r) => h.cloud.instance(r.instanceId!)?.state !== "terminated")).toBe(true);
  });
});
