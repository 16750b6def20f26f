import { createEvent } from "@cgs/shared";
import { listRunningSessions, type RunningSessionRef } from "../data/metered-session-repository";
import type { BillingDeps } from "./billing-deps";

const PAGE = 500;
const PER_EVENT = 100;

/**
 * Asks sessions about every session billing still meters (metering.audit, one event per account and up
 * to 100 sessions): sessions answers with a fresh end event for each one that has in truth ended, so a
 * lost or DLQ'd session.stopped still ends the charge at the real stop time. Sessions younger than a
 * billed minute are left out (their start may still be on its way through the queues).
 */
export async function auditRunningSessions(deps: BillingDeps): Promise<number> {
  const startedBefore = new Date(deps.clock.now().getTime() - deps.settings.minuteMs);
  let asked = 0;
  let after: string | undefined;
  for (;;) {
    const page = await listRunningSessions(deps.db, { startedBefore, afterSessionId: after, limit: PAGE });
    if (page.length === 0) break;
    const byAccount = new Map<string, string[]>();
    for (const s of page) byAccount.set(s.accountId, [...(byAccount.get(s.accountId) ?? []), s.sessionId]);
    await deps.db.transaction(async (tx) => {
      for (const [accountId, ids] of byAccount) {
        for (let i = 0; i < ids.length; i += PER_EVENT) {
          const sessionIds = ids.slice(i, i + PER_EVENT);
          const event = createEvent("metering.audit", accountId, { sessionIds });
          await deps.publisher.publish(tx, event);
        }
      }
    });
    asked += page.length;
    after = (page[page.length - 1] as RunningSessionRef).sessionId;
    if (page.length < PAGE) break;
  }
  return asked;
}
