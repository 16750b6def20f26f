/**
 * Capacity benchmark: time to play under one simulated day of demand, with capacity pools and without them (every
 * start a cold launch, the baseline), in the same run. Prints numbers; asserts nothing.
 *   npx tsc -b services/sessions && \
 *     npx tsx --tsconfig tsconfig.test.json services/sessions/bench/capacity-bench.ts [--quick] [--seed N]
 * Needs PostgreSQL (TEST_DATABASE_URL) and moto (AWS_ENDPOINT_URL) like the other sessions benchmarks.
 *
 * The service's own code runs: starts through `startSession` (hot, then warm, then cold), the reconciler, the pool
 * keeper, the assignment, the host agents' real code (standby reports, session reports) handed over in process, on
 * PostgreSQL, at the service's default reconciler and pool intervals and with its wakeups. Only time is simulated:
 * one clock drives the use cases and the simulators, advanced in steps of STEP_MS (1 s, the resolution of every
 * figure), so a day of EC2 timings runs in minutes. The simulator's timings are EC2's (a cold launch to running
 * about 3.5 min, a stopped instance started about 35 s, Sunshine up 4 s after its session, each ±20 % per instance,
 * seeded). Demand: arrivals drawn from a diurnal curve (a quiet night, an evening peak), each player playing 20 to
 * 120 min, the same seeded sequence in both runs.
 *
 * The pools are sized as prod's stack file sizes them (Pulumi.prod.yaml's cgs:capacityPools, its prices included).
 *
 * Rows: start-to-ready p50 and p95 per capacity kind, all starts together beside the cold-only baseline, and the
 * idle capacity's share of running instance hours (pool instances running without a session), with the stopped
 * (warm) instance hours and the idle cost at the stack's default prices.
 */
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { parse } from "yaml";
import type { ReportSink } from "@cgs/host-agent";
import { testClock } from "@cgs/shared/testing/clock";
import { formatNumber, reportRows, type BenchRow } from "../../../test/bench/results";
import { sessionsTable } from "../src/data/session-tables";
import { ingestHostReports } from "../src/domain/host-reports";
import { PoolKeeper } from "../src/domain/pool-keeper";
import { startSession } from "../src/domain/start-session";
import { stopSession } from "../src/domain/stop-session";
import { startSessionsHarness } from "../src/testing/sessions-harness";

const quick = process.argv.includes("--quick");
const seedArg = process.argv.indexOf("--seed");
const SEED = seedArg > 0 ? Number(process.argv[seedArg + 1]) : 20261125;
/** The simulated span: a whole day, or (--quick) the four hours around the evening peak. */
const DAY_FROM_HOUR = quick ? 17 : 0;
const DAY_HOURS = quick ? 4 : 24;
const STEP_MS = 1_000;
/** The agents' sampling (they report at once on a change, else every 30 s). */
const AGENT_TICK_MS = 1_000;

/** Starts per hour by hour of day (UTC): the evening peak is what the pools are sized for. */
const DEMAND = [3, 2, 1, 1, 1, 2, 3, 4, 5, 6, 6, 7, 8, 8, 9, 10, 12, 16, 22, 26, 24, 18, 10, 5];

/** mulberry32: the same seed gives the same day in both runs. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Visit {
  at: number;
  playMs: number;
}

/** Poisson arrivals per hour of the curve, each with its play time. */
function dayOfDemand(dayStart: number): Visit[] {
  const random = seeded(SEED);
  const visits: Visit[] = [];
  for (let h = DAY_FROM_HOUR; h < DAY_FROM_HOUR + DAY_HOURS; h += 1) {
    const rate = DEMAND[h % 24]!;
    let t = 0;
    for (;;) {
      t += (-Math.log(1 - random()) / rate) * 3_600_000;
      if (t >= 3_600_000) break;
      visits.push({ at: dayStart + h * 3_600_000 + t, playMs: (20 + random() * 100) * 60_000 });
    }
  }
  return visits.sort((a, b) => a.at - b.at);
}

const percentile = (sorted: number[], p: number) =>
  sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
const secs = (ms: number) => (Number.isNaN(ms) ? "—" : `${formatNumber(ms / 1000, 1)} s`);

interface DayResult {
  readyMs: Record<"hot" | "warm" | "cold" | "all", number[]>;
  notReady: number;
  refused: number;
  servingMs: number;
  idleRunningMs: number;
  stoppedMs: number;
  wallMs: number;
}

interface StackPools {
  hot: { min: number; max: number; coverMinutes: number };
  warm: { min: number; max: number; coverMinutes: number };
  shrinkAfterMinutes: number;
  runningHourCost: number;
  stoppedHourCost: number;
}

/** Prod's capacity pools as its stack file sets them (what `pulumi up` passes to sessions as POOL_*). */
function prodPools(): Record<string, string> {
  const stack = parse(readFileSync(path.join(__dirname, "../../../Pulumi.prod.yaml"), "utf8")) as {
    config: Record<string, StackPools>;
  };
  const pools = stack.config["cgs:capacityPools"]!;
  return {
    POOL_HOT_MIN: String(pools.hot.min),
    POOL_HOT_MAX: String(pools.hot.max),
    POOL_HOT_COVER_MINUTES: String(pools.hot.coverMinutes),
    POOL_WARM_MIN: String(pools.warm.min),
    POOL_WARM_MAX: String(pools.warm.max),
    POOL_WARM_COVER_MINUTES: String(pools.warm.coverMinutes),
    POOL_SHRINK_AFTER_MINUTES: String(pools.shrinkAfterMinutes),
    POOL_RUNNING_HOUR_COST: String(pools.runningHourCost),
    POOL_STOPPED_HOUR_COST: String(pools.stoppedHourCost),
  };
}
const POOLS_ON = prodPools();

async function simulateDay(pools: boolean): Promise<DayResult> {
  const dayStart = Date.parse("2026-11-24T00:00:00Z");
  const clock = testClock(new Date(dayStart + DAY_FROM_HOUR * 3_600_000));
  const now = () => clock.now().getTime();
  const inbox: string[] = [];
  const sink = (): ReportSink => ({
    send: async (body) => {
      inbox.push(body);
    },
  });
  const h = await startSessionsHarness({
    db: "postgres",
    contractCheck: false,
    hostAgents: true,
    clock,
    simulation: { now, random: seeded(SEED + 1), sink },
    bootDelayMs: 210_000,
    hostReadyDelayMs: 4_000,
    env: {
      SIMULATOR_START_DELAY_MS: "35000",
      SIMULATOR_STOP_DELAY_MS: "20000",
      SIMULATOR_ATTACH_DELAY_MS: "5000",
      SIMULATOR_DETACH_DELAY_MS: "10000",
      SIMULATOR_JITTER: "0.2",
      SIMULATOR_AGENT_REPORT_INTERVAL_MS: "30000",
      SESSION_START_TIMEOUT_MS: "900000",
      ...(pools ? POOLS_ON : {}),
    },
  });
  const began = Date.now();
  const keeper = new PoolKeeper(h.deps);
  // The service's own intervals, and the reconciler's wakeups (a claim, a report) as the workers' kick does.
  const reconcileMs = h.config.RECONCILER_INTERVAL_MS;
  const poolTickMs = h.config.POOL_INTERVAL_MS;
  let reconcileNow = false;
  h.deps.wake.onReconciler(() => {
    reconcileNow = true;
  });
  const hosts = h.cloud.hosts!;
  const visits = dayOfDemand(dayStart);
  const end = dayStart + (DAY_FROM_HOUR + DAY_HOURS) * 3_600_000;
  const playing = new Map<string, { stopAt: number; startedAt: number }>();
  const result: DayResult = {
    readyMs: { hot: [], warm: [], cold: [], all: [] },
    notReady: 0,
    refused: 0,
    servingMs: 0,
    idleRunningMs: 0,
    stoppedMs: 0,
    wallMs: 0,
  };
  let next = 0;
  let lastPoolTick = -Infinity;
  let lastAgentTick = -Infinity;
  let lastReconcile = -Infinity;
  let poolCounts = { idleRunning: 0, stopped: 0 };
  try {
    // Runs until the day is over and its last players have stopped (no start left half-measured).
    while (now() < end || playing.size > 0) {
      const t = now();
      for (; next < visits.length && visits[next]!.at <= t && t < end; next += 1) {
        const accountId = `cap-${randomUUID()}`;
        try {
          await startSession(h.deps, { accountId, accessToken: await h.token(accountId) });
          playing.set(accountId, { stopAt: t + visits[next]!.playMs, startedAt: t });
        } catch {
          result.refused += 1;
        }
      }
      for (const [accountId, p] of playing) {
        if (p.stopAt > t) continue;
        playing.delete(accountId);
        result.servingMs += t - p.startedAt;
        await stopSession(h.deps, accountId).catch(() => undefined);
      }
      h.cloud.bootDueHosts();
      if (t - lastAgentTick >= AGENT_TICK_MS) {
        lastAgentTick = t;
        await hosts.tickAll();
        if (inbox.length > 0) await ingestHostReports(h.deps, h.vault.agentKeys, inbox.splice(0));
      }
      if (reconcileNow || t - lastReconcile >= reconcileMs) {
        lastReconcile = t;
        reconcileNow = false;
        await h.reconciler.tick();
      }
      if (pools && t - lastPoolTick >= poolTickMs) {
        lastPoolTick = t;
        const report = await keeper.tick();
        const c = report.counts;
        poolCounts = { idleRunning: c.hot + c.launching + c.parking, stopped: c.warm };
      }
      result.idleRunningMs += poolCounts.idleRunning * STEP_MS;
      result.stoppedMs += poolCounts.stopped * STEP_MS;
      clock.advance(STEP_MS);
    }
    const rows = await h.database.db.select().from(sessionsTable);
    for (const row of rows) {
      if (!row.readyAt) {
        result.notReady += 1;
        continue;
      }
      const ms = row.readyAt.getTime() - row.createdAt.getTime();
      result.readyMs[row.capacity].push(ms);
      result.readyMs.all.push(ms);
    }
    for (const list of Object.values(result.readyMs)) list.sort((a, b) => a - b);
    result.wallMs = Date.now() - began;
    return result;
  } finally {
    await h.close();
  }
}

async function main(): Promise<void> {
  const span = quick ? `${DAY_HOURS} h around the evening peak` : "one day";
  console.log(`Capacity: simulating ${span} (seed ${SEED}) without pools, then with them ...`);
  const baseline = await simulateDay(false);
  const pooled = await simulateDay(true);
  const cold = baseline.readyMs.all;
  const rows: BenchRow[] = [];
  for (const kind of ["hot", "warm", "cold", "all"] as const) {
    const list = pooled.readyMs[kind];
    if (list.length === 0) continue;
    rows.push({
      name: `start-to-ready with pools, ${kind === "all" ? "all starts" : `${kind} starts`} (${list.length}), p50 / p95`,
      value: `${secs(percentile(list, 50))} / ${secs(percentile(list, 95))}`,
      baseline: `cold only (${cold.length}): ${secs(percentile(cold, 50))} / ${secs(percentile(cold, 95))}`,
      ratio: `${formatNumber(percentile(cold, 50) / percentile(list, 50), 1)}× faster at p50`,
      target: kind === "all" ? "p50 ≤ 10 s, p95 ≤ 45 s" : "—",
    });
  }
  const runningMs = pooled.servingMs + pooled.idleRunningMs;
  const idleShare = pooled.idleRunningMs / runningMs;
  const hours = (ms: number) => ms / 3_600_000;
  // The stack's prices are in cents per instance hour.
  const running = Number(POOLS_ON.POOL_RUNNING_HOUR_COST) / 100;
  const stopped = Number(POOLS_ON.POOL_STOPPED_HOUR_COST) / 100;
  const idleCost = hours(pooled.idleRunningMs) * running + hours(pooled.stoppedMs) * stopped;
  rows.push({
    name: "idle pool capacity, share of running instance hours",
    value: `${formatNumber(idleShare * 100, 1)} % (${formatNumber(hours(pooled.idleRunningMs), 1)} of ${formatNumber(hours(runningMs), 1)} h)`,
    baseline: `cold only: 0 % (${formatNumber(hours(baseline.servingMs), 1)} h played)`,
    target: "≤ 15 %",
  });
  rows.push({
    name: `idle pool cost over the span (prod's prices: $${running}/h running, $${stopped}/h stopped)`,
    value: `$${formatNumber(idleCost, 2)} (${formatNumber(hours(pooled.stoppedMs), 1)} stopped instance hours)`,
    baseline: `played: $${formatNumber(hours(pooled.servingMs) * running, 2)}`,
  });
  rows.push({
    name: "starts refused / never ready",
    value: `${pooled.refused} / ${pooled.notReady}`,
    baseline: `cold only: ${baseline.refused} / ${baseline.notReady}`,
    target: "0 / 0",
  });
  rows.push({
    name: "wall time to simulate",
    value: `${formatNumber(pooled.wallMs / 1000, 0)} s`,
    baseline: `cold only: ${formatNumber(baseline.wallMs / 1000, 0)} s`,
  });
  reportRows(`Capacity: time to play over ${span}, capacity pools vs cold launches (seed ${SEED})`, rows);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
