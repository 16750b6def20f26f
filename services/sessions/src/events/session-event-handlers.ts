import type { EventData, EventHandlers } from "@cgs/shared";
import { requestVolumeDeletion, setCreditsStopAt } from "../data/session-repository";
import type * as schema from "../data/schema";
import type { SpendLimitStop } from "../data/session-tables";
import type { SessionsDomainDeps } from "../domain/session-deps";
import { answerMeteringAudit } from "../domain/metering-audit";
import { purgeAccountNetwork } from "../domain/private-network-keys";
import { requestStop } from "../domain/stop-session";

/** The spending limit a billing event names (events from before limits existed name none). */
function spendLimitOf(
  data: EventData<"credits.low"> | EventData<"credits.exhausted">,
): SpendLimitStop | null {
  if (data.reason !== "spend_limit" || !data.spendLimit) return null;
  return { ...data.spendLimit, currency: data.currency };
}

/**
 * What sessions does with billing's and accounts' events. Each runs in the consumer's transaction; the
 * instance itself is terminated by the reconciler, which sees the session in `stopping`.
 */
export function sessionEventHandlers(
  deps: Pick<SessionsDomainDeps, "events" | "clock" | "privateNetwork">,
): EventHandlers<typeof schema> {
  return {
    // Only the session billing ran out on: a newer one the player has since paid for keeps running. The reason is
    // the balance, or the player's spending limit (named in the stop's message).
    "credits.exhausted": async (event, tx) => {
      const limit = spendLimitOf(event.data);
      const reason = event.data.reason === "spend_limit" ? "spend_limit" : "credits_exhausted";
      await requestStop(deps, tx, event.accountId, reason, event.data.sessionId, limit ?? undefined);
    },
    // The balance, or a spending limit, will not allow much longer: poll warns with the time (a top-up, or a raised
    // limit, clears it).
    "credits.low": async (event, tx) => {
      const runsOutAt = event.data.runsOutAt ? new Date(event.data.runsOutAt) : null;
      await setCreditsStopAt(
        tx,
        event.data.sessionId,
        runsOutAt,
        new Date(event.occurredAt),
        spendLimitOf(event.data),
      );
    },
    "metering.audit": (event, tx) => answerMeteringAudit(deps, tx, event.accountId, event.data.sessionIds),
    "account.purge": async (event, tx) => {
      await requestStop(deps, tx, event.data.identityUserId, "account_deletion");
      await requestVolumeDeletion(tx, event.data.identityUserId);
      // Its devices and hosts leave the private network now; the instance itself goes with the reconciler.
      await purgeAccountNetwork(deps.privateNetwork, tx, event.data.identityUserId);
    },
  };
}
