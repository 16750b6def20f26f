import { findSession, type SessionsTx } from "../data/session-repository";
import { publishSessionFailed, publishSessionStopped } from "./session-events";
import type { SessionsDomainDeps } from "./session-deps";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * metering.audit: billing still meters these sessions. Each one that has in truth ended gets a fresh
 * end event with its real end time, so an end event that was lost or parked in a DLQ still ends the charge.
 * Sessions still starting or running are left alone.
 */
export async function answerMeteringAudit(
  deps: Pick<SessionsDomainDeps, "events" | "clock">,
  tx: SessionsTx,
  accountId: string,
  sessionIds: readonly string[],
): Promise<void> {
  for (const id of sessionIds) {
    if (!UUID.test(id)) continue;
    const row = await findSession(tx, id);
    if (!row || row.accountId !== accountId) continue;
    if (row.state === "failed") await publishSessionFailed(deps, tx, row, "reconciled");
    else if (row.state === "stopped" || row.state === "stopping") await publishSessionStopped(deps, tx, row);
  }
}
