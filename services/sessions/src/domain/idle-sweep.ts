import {
  deleteExpiredIdempotencyKeys,
  deleteExpiredPins,
  findIdleSessions,
} from "../data/session-repository";
import type { SessionsDomainDeps } from "./session-deps";
import { requestStop, terminateSoon } from "./stop-session";

/**
 * Stops running sessions with no activity for their idle timeout. Activity is the last poll, pair, connect
 * or vpn-key call (the portal and clients poll while in use); the streaming host's own input timestamps
 * are not read.
 */
export async function sweepIdleSessions(deps: SessionsDomainDeps, limit = 500): Promise<number> {
  let stopped = 0;
  for (const idle of await findIdleSessions(deps.db, limit)) {
    const row = await deps.db.transaction((tx) => requestStop(deps, tx, idle.accountId, "idle_timeout"));
    if (row && row.id === idle.id) {
      stopped += 1;
      deps.logger.info({ sessionId: row.id }, "idle session stopped");
      await terminateSoon(deps, row);
    }
  }
  // Housekeeping rides on the same loop: expired PIN digests and idempotency keys are dropped.
  await deleteExpiredPins(deps.db);
  await deleteExpiredIdempotencyKeys(deps.db, deps.settings.idempotencyTtlHours);
  return stopped;
}
