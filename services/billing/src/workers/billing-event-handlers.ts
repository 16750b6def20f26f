import type { EventHandlers } from "@cgs/shared";
import type { BillingDeps } from "../domain/billing-deps";
import { closeWallet } from "../domain/account-closure";
import { failMetering, startMetering, stopMetering } from "../domain/metering";
import type { BillingSchema } from "../data/wallet-repository";

/** Events billing consumes from its queue; each runs in the transaction that records the event id. */
export function billingEventHandlers(deps: BillingDeps): EventHandlers<BillingSchema> {
  return {
    "session.started": (event, tx) =>
      startMetering(tx, deps, {
        accountId: event.accountId,
        sessionId: event.data.sessionId,
        ratePerMinute: event.data.ratePerMinute,
        currency: event.data.currency,
        startedAt: new Date(event.data.startedAt),
      }),
    "session.stopped": (event, tx) =>
      stopMetering(
        tx,
        deps,
        {
          accountId: event.accountId,
          sessionId: event.data.sessionId,
          ratePerMinute: event.data.ratePerMinute,
          currency: event.data.currency,
          startedAt: new Date(event.data.startedAt),
        },
        new Date(event.data.stoppedAt),
      ),
    "session.failed": (event, tx) =>
      failMetering(tx, deps, event.accountId, event.data.sessionId, new Date(event.data.failedAt)),
    "account.purge": (event, tx) => closeWallet(tx, deps, event.data.identityUserId),
  };
}
