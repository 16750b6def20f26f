import { randomUUID } from "node:crypto";
import { metrics } from "@cgs/shared";
import { CloudCapacityError, type PoolInstance } from "../adapters/cloud-provider";
import {
  claimedPoolIds,
  countStartsSince,
  deletePoolSlot,
  insertPoolSlot,
  listPool,
  movePoolSlot,
} from "../data/pool-repository";
import type { PoolInstanceRow, PoolState } from "../data/pool-tables";
import type { PoolSettings, SessionsDomainDeps } from "./session-deps";

export interface PoolTargets {
  hot: number;
  warm: number;
  /** Starts in the last hour, or the last ten minutes' pace when that is higher (a rush). */
  startsPerHour: number;
}

export interface PoolTickReport {
  targets: PoolTargets;
  counts: Record<PoolState, number>;
  launched: number;
  woken: number;
  parked: number;
  terminated: number;
  orphans: number;
  cloudCalls: number;
}

const clamp = (n: number, min: number, max: number) => Math.min(max, Math.max(min, n));

/** Targets from demand: the starts expected over each kind's cover time, within its floor and ceiling. */
export function poolTargets(settings: PoolSettings, startsPerHour: number): PoolTargets {
  const expected = (coverMinutes: number) => Math.ceil((startsPerHour * coverMinutes) / 60);
  return {
    hot: clamp(expected(settings.hot.coverMinutes), settings.hot.min, settings.hot.max),
    warm: clamp(expected(settings.warm.coverMinutes), settings.warm.min, settings.warm.max),
    startsPerHour,
  };
}

/**
 * Keeps the capacity pool of one availability zone at its targets. Each tick: reads the pool's instances from the
 * cloud and its rows, moves each slot along (launching → hot or parking → warm; a warm one woken goes back to
 * launching until its agent reports again), then fills what is missing in order of speed (hot from instances already
 * up, then by waking warm ones, then new launches) and, only once a surplus has lasted POOL_SHRINK_AFTER_MINUTES,
 * parks hot instances and terminates warm ones. At most `changesPerTick` cloud calls that change anything per tick.
 * An instance claimed by a session leaves the pool for good: it is never parked, woken or handed to another account.
 * Run by one replica at a time (the worker holds an advisory lock).
 */
export class PoolKeeper {
  private surplusSince: { hot?: number; warm?: number } = {};

  constructor(private readonly deps: SessionsDomainDeps) {}

  private get settings(): PoolSettings {
    return this.deps.settings.pool;
  }

  async tick(): Promise<PoolTickReport> {
    const { db, cloud, clock, settings: all } = this.deps;
    const az = all.availabilityZone;
    const now = clock.now();
    const hourAgo = new Date(now.getTime() - 60 * 60_000);
    const tenMinutesAgo = new Date(now.getTime() - 10 * 60_000);
    const startsPerHour = Math.max(
      await countStartsSince(db, hourAgo, cloud.region),
      (await countStartsSince(db, tenMinutesAgo, cloud.region)) * 6,
    );
    const targets = poolTargets(this.settings, startsPerHour);
    const report: PoolTickReport = {
      targets,
      counts: { launching: 0, hot: 0, parking: 0, warm: 0 },
      launched: 0,
      woken: 0,
      parked: 0,
      terminated: 0,
      orphans: 0,
      cloudCalls: 0,
    };
    // The cloud first, then the rows: an instance claimed in between is then already a session's (see orphans).
    const described = await cloud.describePoolInstances();
    report.cloudCalls += described.calls;
    const rows = await listPool(db, az);
    const byPool = new Map(described.instances.map((i) => [i.poolId, i]));
    let budget = this.settings.changesPerTick;
    const spend = () => (budget > 0 ? ((budget -= 1), (report.cloudCalls += 1), true) : false);

    const live: PoolInstanceRow[] = [];
    for (const row of rows) {
      const next = await this.advance(row, byPool.get(row.id), now, spend, report);
      if (next) live.push(next);
    }
    await this.terminateOrphans(described.instances, new Set(rows.map((r) => r.id)), spend, report);

    const inState = (state: PoolState) => live.filter((r) => r.state === state);
    const up = inState("launching").filter((r) => r.standbyAt && byPool.get(r.id)?.state === "running");
    let hot = inState("hot").length;
    // Instances that came up: hot while the hot pool is short, parked otherwise.
    for (const row of up) {
      if (hot < targets.hot) {
        if (await movePoolSlot(db, row.id, "launching", { state: "hot", stateSince: now })) hot += 1;
      } else if (spend()) {
        await this.park(row, now, report);
      }
    }
    // Still short of hot: wake warm instances (oldest first); what is booting already counts.
    let hotShort = targets.hot - hot - (inState("launching").length - up.length);
    for (const row of inState("warm")) {
      if (hotShort <= 0 || !spend()) break;
      if (await this.wake(row, now, report)) hotShort -= 1;
    }
    // Short overall: new launches make up both kinds (each is kept hot or parked once it is up).
    let missing = targets.hot + targets.warm - live.length;
    while (missing > 0 && spend()) {
      if (!(await this.launch(az, now, report))) break;
      missing -= 1;
    }
    await this.shrink(await listPool(db, az), targets, now, spend, report);

    for (const row of await listPool(db, az)) report.counts[row.state] += 1;
    this.export(report);
    return report;
  }

  /** One slot against what the cloud says; undefined when the slot is gone. */
  private async advance(
    row: PoolInstanceRow,
    instance: PoolInstance | undefined,
    now: Date,
    spend: () => boolean,
    report: PoolTickReport,
  ): Promise<PoolInstanceRow | undefined> {
    const { db, logger } = this.deps;
    const age = now.getTime() - row.stateSince.getTime();
    const grace = this.deps.settings.reconciler.describeGraceMs;
    if (!row.instanceId) {
      // The launch's answer was never recorded: the launch is idempotent per slot, so it is asked again.
      if (age < grace || !spend()) return row;
      return (await this.launchSlot(row.id, now, report)) ? row : undefined;
    }
    if (!instance || instance.state === "terminated" || instance.state === "shutting-down") {
      if (instance || age >= grace) {
        logger.warn(
          { poolId: row.id, instanceId: row.instanceId },
          "pool instance gone; its slot is dropped",
        );
        await deletePoolSlot(db, row.id);
        return undefined;
      }
      return row;
    }
    if (row.state === "launching" && age > this.settings.launchTimeoutMs && !row.standbyAt) {
      if (!spend()) return row;
      logger.warn({ poolId: row.id, instanceId: row.instanceId }, "pool instance never came up; terminated");
      await this.terminate(row, report);
      return undefined;
    }
    if (row.state === "parking" && instance.state === "stopped") {
      await movePoolSlot(db, row.id, "parking", { state: "warm", stateSince: now });
      return { ...row, state: "warm", stateSince: now };
    }
    if (row.state === "hot" && instance.state !== "running") {
      if (!spend()) return row;
      logger.warn(
        { poolId: row.id, instanceId: row.instanceId, state: instance.state },
        "hot instance not running",
      );
      await this.terminate(row, report);
      return undefined;
    }
    if (row.state === "warm" && instance.state !== "stopped") {
      // Started by someone else (or a lost answer to our own wake): it is booting again.
      await movePoolSlot(db, row.id, "warm", { state: "launching", stateSince: now, standbyAt: null });
      return { ...row, state: "launching", stateSince: now, standbyAt: null };
    }
    return row;
  }

  /** Pool-tagged instances that are neither a slot's nor an active session's: launched and then forgotten. */
  private async terminateOrphans(
    instances: PoolInstance[],
    slots: Set<string>,
    spend: () => boolean,
    report: PoolTickReport,
  ): Promise<void> {
    const unknown = instances.filter((i) => !slots.has(i.poolId));
    const claimed = await claimedPoolIds(
      this.deps.db,
      unknown.map((i) => i.poolId),
    );
    for (const instance of unknown) {
      if (claimed.has(instance.poolId) || !spend()) continue;
      this.deps.logger.warn(
        { instanceId: instance.instanceId, poolId: instance.poolId },
        "orphan pool instance",
      );
      await this.deps.cloud.terminateInstance(instance.instanceId);
      metrics.poolChanges.labels("orphan").inc();
      report.orphans += 1;
    }
  }

  /** A new slot: its row first (so its instance is never an orphan), then the launch. */
  private async launch(az: string, now: Date, report: PoolTickReport): Promise<boolean> {
    const id = randomUUID();
    await insertPoolSlot(this.deps.db, { id, region: this.deps.cloud.region, availabilityZone: az, at: now });
    return this.launchSlot(id, now, report);
  }

  private async launchSlot(id: string, now: Date, report: PoolTickReport): Promise<boolean> {
    const { db, cloud, logger, settings } = this.deps;
    try {
      const { instanceId } = await cloud.launchPoolInstance({
        poolId: id,
        availabilityZone: settings.availabilityZone,
      });
      await movePoolSlot(db, id, "launching", { instanceId, stateSince: now });
      metrics.poolChanges.labels("launch").inc();
      report.launched += 1;
      return true;
    } catch (err) {
      // No capacity now: the slot goes and a later tick tries again; players still get cold launches meanwhile.
      await deletePoolSlot(db, id);
      if (err instanceof CloudCapacityError)
        logger.warn({ cloudCode: err.cloudCode }, "no capacity for the pool");
      else logger.error({ err }, "pool launch failed");
      return false;
    }
  }

  private async wake(row: PoolInstanceRow, now: Date, report: PoolTickReport): Promise<boolean> {
    const { db, cloud, logger } = this.deps;
    // The row moves first: a start can no longer claim it as warm while it boots.
    if (!(await movePoolSlot(db, row.id, "warm", { state: "launching", stateSince: now, standbyAt: null })))
      return false;
    try {
      await cloud.startInstance(row.instanceId!);
      metrics.poolChanges.labels("wake").inc();
      report.woken += 1;
      return true;
    } catch (err) {
      logger.warn({ err, poolId: row.id }, "could not wake a warm instance; it is replaced");
      await this.terminate(row, report);
      return false;
    }
  }

  private async park(row: PoolInstanceRow, now: Date, report: PoolTickReport): Promise<void> {
    const { db, cloud } = this.deps;
    if (
      !(await movePoolSlot(db, row.id, ["launching", "hot"], {
        state: "parking",
        stateSince: now,
        standbyAt: null,
      }))
    )
      return;
    try {
      await cloud.stopInstance(row.instanceId!);
      metrics.poolChanges.labels("park").inc();
      report.parked += 1;
    } catch (err) {
      this.deps.logger.warn({ err, poolId: row.id }, "could not park an instance; it is replaced");
      await this.terminate(row, report);
    }
  }

  private async terminate(row: PoolInstanceRow, report: PoolTickReport): Promise<void> {
    await deletePoolSlot(this.deps.db, row.id);
    if (row.instanceId) await this.deps.cloud.terminateInstance(row.instanceId);
    metrics.poolChanges.labels("terminate").inc();
    report.terminated += 1;
  }

  /** A surplus that has lasted: hot instances are parked (cheap to keep), then warm ones beyond target terminated. */
  private async shrink(
    slots: PoolInstanceRow[],
    targets: PoolTargets,
    now: Date,
    spend: () => boolean,
    report: PoolTickReport,
  ): Promise<void> {
    const lasted = (kind: "hot" | "warm", surplus: boolean): boolean => {
      if (!surplus) {
        delete this.surplusSince[kind];
        return false;
      }
      this.surplusSince[kind] ??= now.getTime();
      return now.getTime() - this.surplusSince[kind] >= this.settings.shrinkAfterMs;
    };
    // The longest waiting first (listPool's order): newer ones keep the freshest boot.
    const hot = slots.filter((r) => r.state === "hot");
    if (lasted("hot", hot.length > targets.hot)) {
      for (const row of hot.slice(0, hot.length - targets.hot)) {
        if (!spend()) break;
        await this.park(row, now, report);
      }
    }
    const warm = slots.filter((r) => r.state === "warm");
    const stopped = warm.length + slots.filter((r) => r.state === "parking").length;
    if (lasted("warm", stopped > targets.warm)) {
      for (const row of warm.slice(0, stopped - targets.warm)) {
        if (!spend()) break;
        await this.terminate(row, report);
      }
    }
  }

  private export(report: PoolTickReport): void {
    const region = this.deps.cloud.region;
    for (const [state, n] of Object.entries(report.counts))
      metrics.poolInstances.labels(region, state).set(n);
    metrics.poolTarget.labels(region, "hot").set(report.targets.hot);
    metrics.poolTarget.labels(region, "warm").set(report.targets.warm);
    const running = report.counts.launching + report.counts.hot + report.counts.parking;
    metrics.poolIdleCost
      .labels(region)
      .set(running * this.settings.runningHourCost + report.counts.warm * this.settings.stoppedHourCost);
  }
}
