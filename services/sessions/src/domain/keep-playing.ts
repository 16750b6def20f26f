import { AppError, metrics } from "@cgs/shared";
import { findActiveSession, updateSessionIf } from "../data/session-repository";
import type { SessionRow } from "../data/session-tables";
import { currentWarning } from "./play-state";
import type { SessionsDomainDeps } from "./session-deps";
import { statusView, toSessionStatus, type SessionStatus } from "./session-status";

/**
 * Keep playing: the player says they are there. The idle clock starts again from now, and a maximum-length stop
 * already being warned about moves one extension later. A stop for lack of credit is never postponed (only a
 * top-up moves it), nor the end of a host that stopped reporting.
 */
export async function keepPlaying(deps: SessionsDomainDeps, accountId: string): Promise<SessionStatus> {
  const now = deps.clock.now();
  const { play } = deps.settings;
  const row = await deps.db.transaction(async (tx): Promise<SessionRow | undefined> => {
    const active = await findActiveSession(tx, accountId, { forUpdate: true });
    if (active?.state !== "running") return undefined;
    const warned = currentWarning(active, now, play)?.kind;
    metrics.sessionKeepalives.labels(warned ?? "none").inc();
    return updateSessionIf(tx, active.id, "running", {
      keptAliveAt: now,
      ...(warned === "max_length"
        ? { lengthExtendedMinutes: active.lengthExtendedMinutes + play.extensionMinutes }
        : {}),
    });
  });
  if (!row) throw new AppError("SESSION_NOT_RUNNING", "There is no running session to keep playing");
  return toSessionStatus(row, statusView(deps));
}
