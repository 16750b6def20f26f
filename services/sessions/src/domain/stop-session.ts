import { AppError } from "@cgs/shared";
import { findActiveSession, findSession, updateSessionIf, type SessionsTx } from "../data/session-repository";
import type { SessionRow, SpendLimitStop } from "../data/session-tables";
import { inRegion } from "./regions";
import { publishSessionStopped } from "./session-events";
import type { SessionsDomainDeps } from "./session-deps";
import { stopMessage, type StopReason } from "./play-state";
import { statusView, toSessionStatus, type SessionStatus } from "./session-status";

/** What a stop request can be for: a failure (instance lost, start failed) is the reconciler's, not a stop. */
export type StopRequestReason = Exclude<StopReason, "instance_lost" | "start_failed">;

/**
 * Moves the account's active session to stopping inside `tx` and writes session.stopped (metering ends
 * now; a session that never ran gets its hold back). Already stopping: unchanged. No active session, or
 * `onlySessionId` names another one: undefined.
 */
export async function requestStop(
  deps: Pick<SessionsDomainDeps, "events" | "clock">,
  tx: SessionsTx,
  accountId: string,
  reason: StopRequestReason,
  onlySessionId?: string,
  /** A spend_limit stop: the limit reached, named in the message. */
  limit?: SpendLimitStop,
): Promise<SessionRow | undefined> {
  const active = await findActiveSession(tx, accountId, { forUpdate: true });
  if (onlySessionId !== undefined && active?.id !== onlySessionId) return undefined;
  if (!active || active.state === "stopping") return active;
  if (active.state === "queued") {
    // No machine and no hold: leaving the line ends it at once.
    const left = await updateSessionIf(tx, active.id, "queued", {
      state: "stopped",
      stoppedAt: deps.clock.now(),
      endedAt: deps.clock.now(),
      stopReason: reason,
      message: reason === "user" ? "Left the line; nothing was charged." : stopMessage(reason, active, limit),
    });
    if (left) await publishSessionStopped(deps, tx, left);
    return left;
  }
  const row = await updateSessionIf(tx, active.id, active.state, {
    state: "stopping",
    ready: false,
    stoppedAt: deps.clock.now(),
    stopReason: reason,
    message: stopMessage(reason, active, limit),
  });
  if (row) await publishSessionStopped(deps, tx, row);
  return row;
}

/** Terminates now rather than waiting for the reconciler; a failure is left for the reconciler to retry. */
export async function terminateSoon(deps: SessionsDomainDeps, row: SessionRow | undefined): Promise<void> {
  if (!row?.instanceId) return;
  await inRegion(deps, row.region)
    .cloud.terminateInstance(row.instanceId)
    .catch((err: unknown) => {
      deps.logger.warn({ err, instanceId: row.instanceId }, "terminate failed; the reconciler retries");
    });
}

export async function stopSession(deps: SessionsDomainDeps, accountId: string): Promise<SessionStatus> {
  const row = await deps.db.transaction((tx) => requestStop(deps, tx, accountId, "user"));
  if (!row) throw new AppError("SESSION_NOT_RUNNING", "There is no active session to stop");
  await terminateSoon(deps, row);
  const left =
    row.state === "stopping" && !row.instanceId && row.queuedAt ? await leftLine(deps, row.id) : undefined;
  return toSessionStatus(left ?? row, statusView(deps));
}

/**
 * Left the line while the queue worker was trying a region for it: that pass ends the session (stopped, or its
 * just-launched machine terminated) within moments, so the answer waits for it, as for any queued session's stop.
 */
async function leftLine(deps: SessionsDomainDeps, sessionId: string): Promise<SessionRow | undefined> {
  const deadline = Date.now() + LEAVE_LINE_WAIT_MS;
  while (Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    const now = await findSession(deps.db, sessionId);
    if (now?.state !== "stopping") return now;
  }
  return undefined;
}

const LEAVE_LINE_WAIT_MS = 5_000;
