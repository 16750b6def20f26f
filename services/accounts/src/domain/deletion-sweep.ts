import type { Logger } from "pino";
import {
  createEvent,
  type Clock,
  type IdentityAdmin,
  type OpenedDatabase,
  type OutboxPublisher,
} from "@cgs/shared";
import type { AccountRepository } from "../data/account-repository";
import type * as schema from "../data/schema";

export interface DeletionSweepDeps {
  database: OpenedDatabase<typeof schema>;
  accounts: AccountRepository;
  identity: IdentityAdmin;
  clock: Clock;
  logger: Logger;
  events: OutboxPublisher;
  batchSize: number;
}

export interface SweepResult {
  purged: string[];
  identitiesDisabled: string[];
  identityFailures: number;
}

const MAX_DISABLE_BACKOFF_MS = 3_600_000;

/**
 * One pass of the deletion sweep, safe with several replicas (due rows are claimed with FOR UPDATE SKIP
 * LOCKED). Each due account is purged in one transaction: account.purge goes to the outbox (sessions stop
 * any session and delete the volume, billing closes the wallet), the account's data is deleted and a
 * tombstone written. The identity-provider user is then disabled outside that transaction, retried with
 * backoff until it succeeds.
 */
export function createDeletionSweep(deps: DeletionSweepDeps) {
  const { database, accounts, identity, clock, logger, events, batchSize } = deps;

  async function purgeDueAccounts(): Promise<string[]> {
    const now = clock.now();
    return database.withTransaction(async (tx) => {
      const due = await accounts.lockDueForPurge(tx, now, batchSize);
      for (const account of due) {
        const event = createEvent(
          "account.purge",
          account.identityUserId,
          {
            identityUserId: account.identityUserId,
            requestedAt: (account.deletionRequestedAt ?? now).toISOString(),
          },
          { occurredAt: now },
        );
        await events.publish(tx, event);
        await accounts.purge(tx, account, now);
      }
      return due.map((a) => a.identityUserId);
    });
  }

  async function disableOneIdentity(): Promise<{ id: string; ok: boolean } | null> {
    const now = clock.now();
    return database.withTransaction(async (tx) => {
      const [row] = await accounts.lockIdentitiesToDisable(tx, now, 1);
      if (!row) return null;
      try {
        await identity.disableUser(row.identityUserId);
        await accounts.markIdentityDisabled(tx, row.identityUserId, now);
        return { id: row.identityUserId, ok: true };
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        const backoff = Math.min(MAX_DISABLE_BACKOFF_MS, 30_000 * 2 ** row.disableAttempts);
        await accounts.recordDisableFailure(tx, row, message, new Date(now.getTime() + backoff));
        logger.warn(
          { identityUserId: row.identityUserId, err: message },
          "identity disable failed; will retry",
        );
        return { id: row.identityUserId, ok: false };
      }
    });
  }

  return {
    async runOnce(): Promise<SweepResult> {
      const purged: string[] = [];
      for (;;) {
        const batch = await purgeDueAccounts();
        purged.push(...batch);
        if (batch.length < batchSize) break;
      }
      const identitiesDisabled: string[] = [];
      let identityFailures = 0;
      for (let i = 0; i < batchSize; i += 1) {
        const outcome = await disableOneIdentity();
        if (!outcome) break;
        if (outcome.ok) identitiesDisabled.push(outcome.id);
        else identityFailures += 1;
      }
      if (purged.length > 0 || identitiesDisabled.length > 0) {
        logger.info(
          { purged: purged.length, identitiesDisabled: identitiesDisabled.length },
          "deletion sweep",
        );
      }
      return { purged, identitiesDisabled, identityFailures };
    },
  };
}

export type DeletionSweep = ReturnType<typeof createDeletionSweep>;
