import { metrics } from "@cgs/shared";
import { updateSessionIf } from "../data/session-repository";
import type { SessionRow } from "../data/session-tables";
import { publishSessionFailed } from "./session-events";
import type { SessionsDomainDeps } from "./session-deps";

/**
 * Ends a starting or running session as failed, with session.failed in the same transaction so billing stops
 * metering at `endedAt` (for a lost instance, the last time it was seen alive: never after its real end).
 * `reason` is the event's (instance_lost, start_timeout, ...); poll's stopReason is instance_lost or start_failed.
 */
export async function failSession(
  deps: Pick<SessionsDomainDeps, "db" | "events" | "clock" | "logger">,
  row: SessionRow,
  reason: string,
  message: string,
  endedAt: Date = deps.clock.now(),
): Promise<boolean> {
  const failed = await deps.db.transaction(async (tx) => {
    const updated = await updateSessionIf(tx, row.id, row.state, {
      state: "failed",
      ready: false,
      message,
      stopReason: reason === "instance_lost" ? "instance_lost" : "start_failed",
      endedAt,
    });
    if (updated) await publishSessionFailed(deps, tx, updated, reason);
    return updated;
  });
  if (!failed) return false;
  deps.logger.warn({ sessionId: row.id, reason }, "session failed");
  if (reason === "instance_lost") metrics.automaticStops.labels("instance_lost").inc();
  return true;
}
