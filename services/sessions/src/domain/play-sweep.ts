import { metrics } from "@cgs/shared";
import {
  deleteExpiredIdempotencyKeys,
  deleteExpiredPins,
  findClientOnlySessions,
  findSessionsNeedingAttention,
  updateSessionIf,
} from "../data/session-repository";
import type { SessionRow } from "../data/session-tables";
import { currentWarning, latest, type PendingStop } from "./play-state";
import { failSession } from "./session-failure";
import type { SessionsDomainDeps } from "./session-deps";
import { requestStop, terminateSoon } from "./stop-session";

export interface SweepReport {
  warned: number;
  stopped: number;
  lost: number;
}

/**
 * Carries out what poll announces. Every automatic stop is warned about first (poll computes the warning from the
 * session's own row, so a player sees it from its window's start); this sweep counts each warning once and stops
 * the session once the announced time has come and the reason still holds: idle and maximum length stop it,
 * a host silent past HOST_LOST_AFTER_MS ends it as instance_lost, charged up to its last report. A stop for
 * lack of credit or at a spending limit is billing's (credits.exhausted), never this sweep's.
 */
export async function sweepPlay(deps: SessionsDomainDeps, limit = 500): Promise<SweepReport> {
  const { play } = deps.settings;
  const now = deps.clock.now();
  const report: SweepReport = { warned: 0, stopped: 0, lost: 0 };
  await checkDevicePresence(deps, now);
  const candidates = await findSessionsNeedingAttention(
    deps.db,
    {
      now,
      minuteMs: play.minuteMs,
      idleLeadMs: play.idleWarningMinutes * play.minuteMs,
      lengthLeadMs: play.maxLengthWarningMinutes * play.minuteMs,
      hostStaleMs: play.hostStaleMs,
    },
    limit,
  );
  for (const row of candidates) {
    const stop = currentWarning(row, now, play);
    if (!stop) {
      // The player came back, chose Keep playing, topped up, or the host reported again.
      if (row.warnedKind) await updateSessionIf(deps.db, row.id, "running", { warnedKind: null });
      continue;
    }
    if (row.warnedKind !== stop.kind) {
      await updateSessionIf(deps.db, row.id, "running", { warnedKind: stop.kind });
      metrics.sessionWarnings.labels(stop.kind).inc();
      deps.logger.info({ sessionId: row.id, kind: stop.kind, stopsAt: stop.stopsAt }, "session warned");
      report.warned += 1;
    }
    if (now < stop.stopsAt) continue;
    if (await carryOut(deps, row, stop)) {
      if (stop.kind === "host_unhealthy") report.lost += 1;
      else report.stopped += 1;
    }
  }
  // Housekeeping rides on the same loop: expired PIN digests and idempotency keys are dropped.
  await deleteExpiredPins(deps.db);
  await deleteExpiredIdempotencyKeys(deps.db, deps.settings.idempotencyTtlHours);
  return report;
}

/**
 * The second presence signal: for sessions that only a connected streaming client keeps alive (no input for the
 * idle warning's lead), ask the private network whether one of the player's devices is on it, at most once a
 * session minute. None is: the client stops counting as play from when the last device was seen (a connection
 * Sunshine still holds for a device that is gone), yet never so far back that the idle stop would come without its
 * warning. One is again: the client counts again. A question the network does not answer changes nothing: no
 * player is stopped because its API failed.
 */
async function checkDevicePresence(deps: SessionsDomainDeps, now: Date): Promise<void> {
  const { play } = deps.settings;
  const leadMs = play.idleWarningMinutes * play.minuteMs;
  const rows = await findClientOnlySessions(deps.db, { now, quietMs: leadMs, recheckMs: play.minuteMs }, 100);
  for (const row of rows) {
    const presence = await deps.privateNetwork.devicePresence(row.accountId).catch((err: unknown) => {
      deps.logger.warn(
        { err, sessionId: row.id },
        "device presence unknown; a connected client still counts",
      );
      return undefined;
    });
    let absentSince = row.deviceAbsentSince;
    if (presence?.online) absentSince = null;
    else if (presence && !absentSince) {
      const idleMs = row.idleTimeoutMinutes * play.minuteMs;
      const warnedInTime = new Date(now.getTime() - idleMs + Math.min(leadMs, idleMs / 2));
      absentSince = latest(row.runningAt, presence.lastSeenAt, warnedInTime);
      deps.logger.info(
        { sessionId: row.id, lastSeenAt: presence.lastSeenAt, devices: presence.devices },
        "a streaming client is connected but none of the player's devices is on the private network",
      );
    }
    await updateSessionIf(deps.db, row.id, "running", {
      presenceCheckedAt: now,
      deviceAbsentSince: absentSince,
    });
  }
}

async function carryOut(deps: SessionsDomainDeps, row: SessionRow, stop: PendingStop): Promise<boolean> {
  switch (stop.kind) {
    case "idle":
    case "max_length": {
      const reason = stop.kind;
      const stopped = await deps.db.transaction((tx) => requestStop(deps, tx, row.accountId, reason, row.id));
      if (stopped?.id !== row.id || stopped.stopReason !== stop.kind) return false;
      metrics.automaticStops.labels(stop.kind).inc();
      deps.logger.info({ sessionId: row.id, reason: stop.kind }, "session stopped automatically");
      await terminateSoon(deps, stopped);
      return true;
    }
    case "host_unhealthy": {
      const heard = row.hostSeenAt ?? row.runningAt ?? row.createdAt;
      const message =
        `The streaming host stopped reporting at ${heard.toISOString()}; the session ended and nothing was` +
        " charged after that.";
      if (!(await failSession(deps, row, "instance_lost", message, heard))) return false;
      await terminateSoon(deps, row);
      return true;
    }
    case "credits":
    case "spend_limit":
      return false;
  }
}
