import { randomUUID } from "node:crypto";
import { signHostReport } from "@cgs/host-agent";
import { testClock, type TestClock } from "@cgs/shared/testing/clock";
import { leasePoolKeeping, listPool } from "../data/pool-repository";
import type { PoolInstanceRow } from "../data/pool-tables";
import { sessionsTable } from "../data/session-tables";
import { startSessionsHarness, type SessionsHarness } from "../testing/sessions-harness";
import { ingestHostReports } from "./host-reports";
import { PoolKeeper, poolTargets } from "./pool-keeper";
import type { PoolSettings, SessionsDomainDeps } from "./session-deps";

const MINUTE = 60_000;

const settings = (overrides: Partial<PoolSettings> = {}): PoolSettings => ({
  hot: { min: 0, max: 4, coverMinutes: 2 },
  warm: { min: 0, max: 10, coverMinutes: 10 },
  shrinkAfterMs: 15 * MINUTE,
  launchTimeoutMs: 20 * MINUTE,
  changesPerTick: 20,
  runningHourCost: 53,
  stoppedHourCost: 1,
  ...overrides,
});

describe("pool targets from demand", () => {
  it("when starts per hour change, then each target is the starts expected over its cover time, within floor and ceiling", () => {
    const s = settings({
      hot: { min: 1, max: 4, coverMinutes: 2 },
      warm: { min: 2, max: 10, coverMinutes: 10 },
    });
    expect(poolTargets(s, 0)).toMatchObject({ hot: 1, warm: 2 });
    expect(poolTargets(s, 60)).toMatchObject({ hot: 2, warm: 10 });
    expect(poolTargets(s, 30)).toMatchObject({ hot: 1, warm: 5 });
    expect(poolTargets(s, 1_000)).toMatchObject({ hot: 4, warm: 10 });
  });
});

// The keeper's ticks on a test clock against the cloud simulator (instances run, stop and start at once here) and
// PostgreSQL; standby reports are signed with each slot's key and go through the real intake, as the agent's would.
describe("the pool keeper", () => {
  let h: SessionsHarness;
  let clock: TestClock;

  beforeAll(async () => {
    clock = testClock("2026-11-25T10:00:00Z");
    h = await startSessionsHarness({ db: "postgres", clock });
  });
  afterAll(() => h.close());

  const keeperWith = (pool: PoolSettings) => {
    const deps: SessionsDomainDeps = { ...h.deps, settings: { ...h.deps.settings, pool } };
    return new PoolKeeper(deps);
  };
  const pool = () => listPool(h.database.db, h.deps.settings.availabilityZone);
  const count = (rows: PoolInstanceRow[], state: string) => rows.filter((r) => r.state === state).length;

  /** Every launched or woken instance's agent reports standby (what the simulated hosts' agents do on boot). */
  async function agentsReport(): Promise<void> {
    const at = clock.now().toISOString();
    const bodies = (await pool())
      .filter((r) => r.instanceId && r.state === "launching")
      .map((r) =>
        JSON.stringify(
          signHostReport(
            {
              kind: "standby",
              instanceId: r.instanceId!,
              sessionId: null,
              poolId: r.id,
              seq: Date.now() + Math.floor(Math.random() * 1000),
              sentAt: at,
              observedAt: at,
              clientsConnected: 0,
              lastInputAt: null,
              sunshineAnswers: false,
              certSha256: null,
              assignCertSha256: "ab".repeat(32),
              agentVersion: "test",
            },
            h.vault.poolKey(r.id),
          ),
        ),
      );
    if (bodies.length > 0) await ingestHostReports(h.deps, h.vault.agentKeys, bodies);
  }

  async function settle(keeper: PoolKeeper, ticks = 4): Promise<PoolInstanceRow[]> {
    for (let i = 0; i < ticks; i += 1) {
      await keeper.tick();
      await agentsReport();
    }
    return pool();
  }

  async function empty(): Promise<void> {
    await settle(
      keeperWith(
        settings({
          hot: { min: 0, max: 0, coverMinutes: 0 },
          warm: { min: 0, max: 0, coverMinutes: 0 },
          shrinkAfterMs: 0,
        }),
      ),
      3,
    );
    expect(await pool()).toEqual([]);
  }

  /** `n` starts recorded at the clock's time (rows of stopped sessions: what the demand count reads). */
  async function startsNow(n: number): Promise<void> {
    for (let i = 0; i < n; i += 1) {
      await h.database.db.insert(sessionsTable).values({
        id: randomUUID(),
        accountId: `demand-${randomUUID()}`,
        state: "stopped",
        region: "us-east-1",
        ratePerMinute: 10,
        currency: "usd",
        idleTimeoutMinutes: 15,
        createdAt: clock.now(),
      });
    }
  }

  it("when the pool is empty, then it launches to its floor, keeps the hot target running and parks the rest", async () => {
    const keeper = keeperWith(
      settings({ hot: { min: 2, max: 4, coverMinutes: 2 }, warm: { min: 3, max: 10, coverMinutes: 10 } }),
    );
    const rows = await settle(keeper);
    expect([count(rows, "hot"), count(rows, "warm"), rows.length]).toEqual([2, 3, 5]);
    const states = h.cloud.instanceStates();
    expect(states.get("running")).toBeGreaterThanOrEqual(2);
    expect(states.get("stopped")).toBeGreaterThanOrEqual(3);
    await empty();
  });

  it("when a rush of starts comes, then the targets rise with it within the ceilings", async () => {
    const pool = settings({
      hot: { min: 1, max: 3, coverMinutes: 2 },
      warm: { min: 1, max: 6, coverMinutes: 10 },
    });
    const keeper = keeperWith(pool);
    expect((await keeper.tick()).targets).toMatchObject({ hot: 1, warm: 1 });
    await startsNow(12); // 12 in ten minutes: 72 an hour.
    const report = await keeper.tick();
    expect(report.targets).toMatchObject({ startsPerHour: 72, hot: 3, warm: 6 });
    clock.advance(61 * MINUTE);
    expect((await keeper.tick()).targets).toMatchObject({ hot: 1, warm: 1 });
    await empty();
  });

  it("when demand falls, then nothing shrinks before the surplus has lasted POOL_SHRINK_AFTER_MINUTES; then hot instances are parked and surplus warm ones terminated", async () => {
    const big = settings({
      hot: { min: 3, max: 3, coverMinutes: 2 },
      warm: { min: 2, max: 2, coverMinutes: 10 },
    });
    await settle(keeperWith(big));
    const small = keeperWith(
      settings({ hot: { min: 1, max: 1, coverMinutes: 2 }, warm: { min: 1, max: 1, coverMinutes: 10 } }),
    );
    let rows = await settle(small, 2);
    expect([count(rows, "hot"), count(rows, "warm")]).toEqual([3, 2]);
    clock.advance(14 * MINUTE);
    rows = await settle(small, 2);
    expect([count(rows, "hot"), count(rows, "warm")]).toEqual([3, 2]);
    clock.advance(2 * MINUTE);
    rows = await settle(small, 1);
    expect(count(rows, "hot")).toBe(1);
    // The parked ones join the warm surplus, which has lasted as long: down to one warm after the next ticks.
    clock.advance(16 * MINUTE);
    rows = await settle(small, 3);
    expect([count(rows, "hot"), count(rows, "warm"), rows.length]).toEqual([1, 1, 2]);
    await empty();
  });

  it("when an instance never reports standby, then it is terminated after POOL_LAUNCH_TIMEOUT_MINUTES and replaced", async () => {
    const keeper = keeperWith(
      settings({ hot: { min: 1, max: 1, coverMinutes: 2 }, warm: { min: 0, max: 0, coverMinutes: 0 } }),
    );
    await keeper.tick(); // launched; its agent stays silent
    const [silent] = await pool();
    clock.advance(21 * MINUTE);
    await keeper.tick();
    expect(h.cloud.instance(silent!.instanceId!)?.state).toBe("terminated");
    const rows = await settle(keeper, 2);
    expect(rows.map((r) => r.id)).not.toContain(silent!.id);
    expect(count(rows, "hot")).toBe(1);
    await empty();
  });

  it("when a hot instance is lost, then its slot is dropped and another launched", async () => {
    const keeper = keeperWith(
      settings({ hot: { min: 1, max: 1, coverMinutes: 2 }, warm: { min: 0, max: 0, coverMinutes: 0 } }),
    );
    const [hot] = await settle(keeper);
    await h.cloud.terminateInstance(hot!.instanceId!);
    clock.advance(MINUTE);
    const rows = await settle(keeper, 3);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.instanceId).not.toBe(hot!.instanceId);
    expect(rows[0]!.state).toBe("hot");
    await empty();
  });

  it("when two replicas tick, then one keeps the pool until its lease lapses, and the other takes over then", async () => {
    const az = `lease-test-${randomUUID()}`;
    const now = clock.now();
    expect(await leasePoolKeeping(h.database.db, az, "a", now, 30_000)).toBe(true);
    expect(await leasePoolKeeping(h.database.db, az, "b", now, 30_000)).toBe(false);
    expect(await leasePoolKeeping(h.database.db, az, "a", new Date(now.getTime() + 20_000), 30_000)).toBe(
      true,
    );
    expect(await leasePoolKeeping(h.database.db, az, "b", new Date(now.getTime() + 40_000), 30_000)).toBe(
      false,
    );
    expect(await leasePoolKeeping(h.database.db, az, "b", new Date(now.getTime() + 51_000), 30_000)).toBe(
      true,
    );
  });
});
