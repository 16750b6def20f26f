import type { EventHandlers } from "@cgs/shared";
import { requestVolumeDeletion } from "../data/session-repository";
import type * as schema from "../data/schema";
import { requestStop } from "./stop-session";

/**
 * What sessions does with billing's and accounts' events. Each runs in the consumer's transaction; the
 * instance itself is terminated by the reconciler, which sees the session in `stopping`.
 */
export function sessionEventHandlers(queuePrefix: string): EventHandlers<typeof schema> {
  return {
    "credits.exhausted": async (event, tx) => {
      await requestStop(tx, event.accountId, "credits_exhausted", queuePrefix);
    },
    "account.purge": async (event, tx) => {
      await requestStop(tx, event.data.identityUserId, "account_purged", queuePrefix);
      await requestVolumeDeletion(tx, event.data.identityUserId);
    },
  };
}
