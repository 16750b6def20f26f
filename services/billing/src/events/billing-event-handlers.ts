import type { EventHandlers } from "@cgs/shared";
import type { BillingDeps } from "../domain/billing-deps";
import { closeWallet } from "../domain/account-closure";
import { endMetering, startMetering, stopMetering } from "../domain/metering";
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
      event.data.startedAt
        ? stopMetering(
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
          )
        : endMetering(tx, deps, {
            accountId: event.accountId,
            sessionId: event.data.sessionId,
            startedAt: null,
            endedAt: new Date(event.data.stoppedAt),
            ratePerMinute: event.data.ratePerMinute,
            currency: event.data.currency,
          }),
    "session.failed": (event, tx) =>
      endMetering(tx, deps, {
        accountId: event.accountId,
        sessionId: event.data.sessionId,
        startedAt: event.data.startedAt ? new Date(event.data.startedAt) : null,
        endedAt: new Date(event.data.failedAt),
        ratePerMinute: event.data.ratePerMinute,
        currency: event.data.currency,
      }),
    "account.purge": (event, tx) => closeWallet(tx, deps, event.data.identityUserId),
  };
}
