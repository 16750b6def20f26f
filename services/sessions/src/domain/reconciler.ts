import { randomUUID } from "node:crypto";
import { metrics } from "@cgs/shared";
import { CloudVolumeNotFoundError, type CloudInstance, type CloudProvider } from "../adapters/cloud-provider";
import { inRegion } from "./regions";
import { AlreadyAssignedError } from "../adapters/host-assigner";
import { HostIdentityError } from "../adapters/pinned-https";
import {
  claimActiveSessions,
  deleteVolumeRow,
  findActiveSession,
  findActiveSessionIds,
  findSession,
  markSeenRunning,
  releaseLeases,
  updateSessionIf,
  volumesPendingDeletion,
} from "../data/session-repository";
import type { SessionRow } from "../data/session-tables";
import { syncDevicesQuietly } from "./devices";
import { failSession } from "./session-failure";
import { publishSessionStarted } from "./session-events";
import type { ReconcilerSettings, SessionsDomainDeps } from "./session-deps";

export type { ReconcilerSettings } from "./session-deps";

export interface TickReport {
  claimed: number;
  cloudCalls: number;
  transitions: Record<string, number>;
  volumesDeleted: number;
  durationMs: number;
}

type Transition = "running" | "ready" | "failed" | "stopped" | "terminated";

/**
 * Moves sessions along their states from what the cloud says. Each tick leases a batch of active sessions
 * (so replicas never handle the same one), describes their instances in batches by tag filter, and acts
 * only on sessions whose state must change.
 */
export class Reconciler {
  private readonly owner: string;

  constructor(
    private readonly deps: SessionsDomainDeps,
    private readonly settings: ReconcilerSettings,
  ) {
    this.owner = settings.owner ?? `reconciler-${randomUUID()}`;
  }

  async tick(): Promise<TickReport> {
    const began = this.deps.clock.now().getTime();
    const report: TickReport = {
      claimed: 0,
      cloudCalls: 0,
      transitions: {},
      volumesDeleted: 0,
      durationMs: 0,
    };
    const { db } = this.deps;
    // Poll's start estimates follow what starts have measured lately (at most once a minute).
    await this.deps.estimates.refresh(db, this.deps.clock.now()).catch((err: unknown) => {
      this.deps.logger.warn({ err }, "start estimates not refreshed");
    });
    const rows = await claimActiveSessions(db, this.owner, this.settings.batchSize, this.settings.leaseMs);
    report.claimed = rows.length;
    try {
      const launched = rows.filter((r) => r.instanceId);
      const byInstance = new Map<string, CloudInstance>();
      if (launched.length > 0) {
        // Taken before the describe call: an instance it reports running was running at this moment or
        // later, so this time is never after the instance's real end.
        const describedAt = this.deps.clock.now();
        // One describe per region (each region's fleet answers for its own instances).
        for (const [region, inThere] of groupBy(launched, (r) => r.region)) {
          const described = await inRegion(this.deps, region).cloud.describeInstances(
            inThere.map((r) => r.id),
          );
          report.cloudCalls += described.calls;
          for (const instance of described.instances) byInstance.set(instance.instanceId, instance);
        }
        const seenRunning = launched.filter(
          (r) => r.state === "running" && byInstance.get(r.instanceId!)?.state === "running",
        );
        await markSeenRunning(
          db,
          seenRunning.map((r) => r.id),
          describedAt,
        );
      }
      const note = (t: Transition | undefined) => {
        if (t) report.transitions[t] = (report.transitions[t] ?? 0) + 1;
      };
      await forEachLimited(rows, this.settings.concurrency ?? 16, async (row) => {
        try {
          const { transition, calls } = await this.reconcile(
            row,
            row.instanceId ? byInstance.get(row.instanceId) : undefined,
          );
          report.cloudCalls += calls;
          note(transition);
          if (transition === "ready") {
            metrics.startToReady
              .labels(row.capacity)
              .observe((this.deps.clock.now().getTime() - row.createdAt.getTime()) / 1000);
            // The host is up: devices removed while no session ran are unpaired now, new ones recorded.
            const ready = await findSession(this.deps.db, row.id);
            if (ready) await syncDevicesQuietly(this.deps, ready);
          }
        } catch (err) {
          this.deps.logger.error(
            { err, sessionId: row.id },
            "reconciling a session failed; retried next tick",
          );
        }
      });
    } finally {
      await releaseLeases(
        db,
        this.owner,
        rows.map((r) => r.id),
      );
    }
    report.volumesDeleted = await this.deletePurgedVolumes(report);
    report.durationMs = this.deps.clock.now().getTime() - began;
    return report;
  }

  private async reconcile(
    row: SessionRow,
    instance: CloudInstance | undefined,
  ): Promise<{ transition?: Transition; calls: number }> {
    const now = this.deps.clock.now().getTime();
    const { cloud } = inRegion(this.deps, row.region);
    const since = (d: Date | null) => now - (d ?? row.createdAt).getTime();
    const timedOut = since(row.createdAt) > this.settings.startTimeoutMs;
    const missing = !instance && since(row.startedAt) > this.settings.describeGraceMs;
    const gone = instance?.state === "terminated" || instance?.state === "shutting-down";

    if (row.state === "stopping") {
      if (!row.instanceId) {
        // A start still launching settles this itself; only an abandoned one is closed here.
        return timedOut ? { transition: await this.close(row), calls: 0 } : { calls: 0 };
      }
      if (instance?.state === "terminated" || missing) {
        return { transition: await this.close(row), calls: 0 };
      }
      if (instance && instance.state !== "shutting-down") {
        await cloud.terminateInstance(row.instanceId);
        return { transition: "terminated", calls: 1 };
      }
      return { calls: 0 };
    }

    if (row.state === "starting") {
      if (!row.instanceId) {
        return timedOut
          ? {
              transition: await this.fail(row, "launch_timeout", "The instance could not be launched"),
              calls: 0,
            }
          : { calls: 0 };
      }
      if (missing || gone || (instance && instance.state !== "pending" && instance.state !== "running")) {
        if (instance && !gone) await cloud.terminateInstance(instance.instanceId);
        return {
          transition: await this.fail(row, "instance_lost", "The instance was lost while starting"),
          calls: instance && !gone ? 1 : 0,
        };
      }
      if (!instance || instance.state === "pending") {
        if (!timedOut) return { calls: 0 };
        await cloud.terminateInstance(row.instanceId);
        const minutes = Math.round(this.settings.startTimeoutMs / 60_000);
        const message = `The instance did not start within ${minutes || 1} minute(s)`;
        return { transition: await this.fail(row, "start_timeout", message), calls: 1 };
      }
      let calls = 0;
      if (row.volumeId && !row.volumeAttached) {
        calls += 1;
        try {
          await cloud.attachVolume(row.volumeId, row.instanceId);
        } catch (err) {
          const lost = err instanceof CloudVolumeNotFoundError;
          if (!timedOut && !lost) throw err;
          await cloud.terminateInstance(row.instanceId);
          // A volume that no longer exists never attaches: fail now, not at the start timeout, and forget it so
          // the account's next start creates a new one instead of meeting the same missing volume again.
          if (lost) await deleteVolumeRow(this.deps.db, row.accountId, row.volumeId);
          const message = lost
            ? "The game library volume no longer exists; start again for a new, empty one"
            : "The game library volume could not be attached";
          return { transition: await this.fail(row, "volume_attach_failed", message), calls: calls + 1 };
        }
      }
      if (row.poolId && !row.assignedAt) {
        // A claimed pool instance runs the session only once it holds its secrets.
        const assigned = await this.assign(row, instance.privateIp);
        if (assigned !== true) {
          if (assigned !== "refused" && !timedOut) return { calls };
          await cloud.terminateInstance(row.instanceId);
          const message =
            assigned === "refused"
              ? "The machine could not take this session"
              : "The machine did not take this session in time";
          return { transition: await this.fail(row, "assignment_failed", message), calls: calls + 1 };
        }
      }
      // Probing before the write lets a host that is already up go straight to ready in one update.
      const ready = instance.privateIp
        ? await this.deps.streamingHost.isReady(instance.privateIp, instance.sessionId)
        : false;
      const runningAt = this.deps.clock.now();
      const running = await this.deps.db.transaction(async (tx) => {
        const updated = await updateSessionIf(tx, row.id, "starting", {
          state: "running",
          publicIp: instance.publicIp,
          privateNetIp: instance.privateIp,
          volumeAttached: row.volumeId ? true : row.volumeAttached,
          runningAt,
          seenRunningAt: runningAt,
          // The idle clock starts when the machine is up: the player has the idle timeout to connect.
          playSeenAt: runningAt,
          ready,
          ...(ready ? { readyAt: runningAt } : {}),
        });
        // Billing meters from here: the instance is running.
        if (updated) await publishSessionStarted(this.deps, tx, updated);
        return updated;
      });
      if (!running) return { calls };
      return { transition: ready ? "ready" : "running", calls };
    }

    // running
    if (missing || gone || (instance && instance.state !== "running")) {
      if (instance && !gone) await cloud.terminateInstance(instance.instanceId);
      return {
        transition: await this.fail(row, "instance_lost", "The instance stopped unexpectedly", {
          // Charged only up to the last time it was seen running, never up to when the loss was noticed.
          endedAt: row.seenRunningAt ?? row.runningAt ?? this.deps.clock.now(),
        }),
        calls: instance && !gone ? 1 : 0,
      };
    }
    if (!row.ready && (await this.probe(row))) return { transition: "ready", calls: 0 };
    return { calls: 0 };
  }

  /** Asks the streaming host whether it answers; marks the session ready when it does. */
  private async probe(row: SessionRow): Promise<boolean> {
    if (!row.privateNetIp) return false;
    if (!(await this.deps.streamingHost.isReady(row.privateNetIp, row.id))) return false;
    const readyAt = this.deps.clock.now();
    return (await updateSessionIf(this.deps.db, row.id, "running", { ready: true, readyAt })) !== undefined;
  }

  /**
   * Hands the claimed pool instance its session, once its agent has been seen waiting since the claim (a woken warm
   * instance takes a while): true when taken, "waiting" while it cannot be yet (retried next tick), "refused" when
   * the instance already took another session (it must not serve this one).
   */
  private async assign(row: SessionRow, privateIp: string | null): Promise<true | "waiting" | "refused"> {
    if (!row.poolStandbyAt || !privateIp || !row.poolId || !row.poolAssignCertSha256) return "waiting";
    const { hostSecrets, assigner, db, logger, clock } = this.deps;
    try {
      const assignment = await hostSecrets.assignmentFor(
        { sessionId: row.id, accountId: row.accountId },
        row.volumeId,
      );
      await assigner.assign(
        {
          instanceId: row.instanceId!,
          privateIp,
          poolId: row.poolId,
          certSha256: row.poolAssignCertSha256,
        },
        assignment,
      );
    } catch (err) {
      if (err instanceof AlreadyAssignedError || err instanceof HostIdentityError) {
        logger.error({ err, sessionId: row.id, instanceId: row.instanceId }, "pool instance refused");
        return "refused";
      }
      logger.warn(
        { err, sessionId: row.id, instanceId: row.instanceId },
        "assignment not taken yet; retried",
      );
      return "waiting";
    }
    await updateSessionIf(db, row.id, "starting", { assignedAt: clock.now() });
    return true;
  }

  private async fail(
    row: SessionRow,
    reason: string,
    message: string,
    options: { endedAt?: Date } = {},
  ): Promise<Transition | undefined> {
    return (await failSession(this.deps, row, reason, message, options.endedAt)) ? "failed" : undefined;
  }

  private async close(row: SessionRow): Promise<Transition | undefined> {
    const updated = await updateSessionIf(this.deps.db, row.id, "stopping", {
      state: "stopped",
      endedAt: this.deps.clock.now(),
    });
    return updated ? "stopped" : undefined;
  }

  /**
   * Instances carrying the platform's tags with no active session are terminated: a launch whose response
   * was lost (the start gave up and deleted its session) or whose database write failed. No race with a
   * start in flight: its session row is committed before its instance is launched.
   */
  async sweepOrphans(): Promise<{ terminated: string[]; calls: number }> {
    const swept = { terminated: [] as string[], calls: 0 };
    for (const fleet of this.deps.regions.fleets) {
      const { terminated, calls } = await this.sweepOrphansIn(fleet.cloud);
      swept.terminated.push(...terminated);
      swept.calls += calls;
    }
    return swept;
  }

  private async sweepOrphansIn(cloud: CloudProvider): Promise<{ terminated: string[]; calls: number }> {
    const { db, logger } = this.deps;
    const listed = await cloud.listManagedInstances();
    const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
    const ids = [...new Set(listed.instances.map((i) => i.sessionId).filter((id) => UUID.test(id)))];
    const live = new Set<string>();
    for (let i = 0; i < ids.length; i += 500) {
      for (const id of await findActiveSessionIds(db, ids.slice(i, i + 500))) live.add(id);
    }
    const terminated: string[] = [];
    let calls = listed.calls;
    for (const instance of listed.instances) {
      if (live.has(instance.sessionId)) continue;
      calls += 1;
      await cloud.terminateInstance(instance.instanceId);
      terminated.push(instance.instanceId);
      logger.warn(
        { instanceId: instance.instanceId, sessionId: instance.sessionId },
        "orphan instance terminated",
      );
    }
    return { terminated, calls };
  }

  /** Volumes of purged accounts, deleted once the account has no session using them. */
  private async deletePurgedVolumes(report: TickReport): Promise<number> {
    const { db, logger } = this.deps;
    let deleted = 0;
    for (const volume of await volumesPendingDeletion(db, 100)) {
      if (await findActiveSession(db, volume.accountId)) continue;
      try {
        report.cloudCalls += 1;
        await inRegion(this.deps, volume.region).cloud.deleteVolume(volume.volumeId);
        await deleteVolumeRow(db, volume.accountId, volume.volumeId);
        deleted += 1;
      } catch (err) {
        logger.warn({ err, volumeId: volume.volumeId }, "volume deletion failed; retried next tick");
      }
    }
    return deleted;
  }
}

function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const group = groups.get(k);
    if (group) group.push(item);
    else groups.set(k, [item]);
  }
  return groups;
}

async function forEachLimited<T>(items: T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const runners = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const item = items[next];
      next += 1;
      await work(item as T);
    }
  });
  await Promise.all(runners);
}
