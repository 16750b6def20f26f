import { and, asc, eq, isNull, lte, sql } from "drizzle-orm";
import type { Database, Transaction } from "@cgs/shared";
import type { StoredPreferences } from "./stored-preferences";
import { accountsTable, purgedAccountsTable, type AccountRow, type PurgedAccountRow } from "./account-tables";
import type * as schema from "./schema";

export type AccountsDb = Database<typeof schema>;
export type AccountsTx = Transaction<typeof schema>;

/** Storage of accounts and their purge tombstones. */
export class AccountRepository {
  constructor(private readonly db: AccountsDb) {}

  async find(identityUserId: string): Promise<AccountRow | undefined> {
    const [row] = await this.db
      .select()
      .from(accountsTable)
      .where(eq(accountsTable.identityUserId, identityUserId));
    return row;
  }

  async isPurged(identityUserId: string): Promise<boolean> {
    const [row] = await this.db
      .select({ id: purgedAccountsTable.identityUserId })
      .from(purgedAccountsTable)
      .where(eq(purgedAccountsTable.identityUserId, identityUserId));
    return row !== undefined;
  }

  /**
   * Inserts the account unless it exists or was purged (one statement, so a purge committing meanwhile
   * cannot be undone by a request carrying the purged user's still-valid token).
   */
  async createIfAbsent(identityUserId: string, email: string | null, now: Date): Promise<void> {
    await this.db.execute(sql`
      insert into ${accountsTable} (identity_user_id, email, created_at, updated_at)
      select ${identityUserId}, ${email}, ${now.toISOString()}, ${now.toISOString()}
      where not exists (
        select 1 from ${purgedAccountsTable} where identity_user_id = ${identityUserId}
      )
      on conflict (identity_user_id) do nothing`);
  }

  async updateEmail(identityUserId: string, email: string, now: Date): Promise<void> {
    await this.db
      .update(accountsTable)
      .set({ email, updatedAt: now })
      .where(eq(accountsTable.identityUserId, identityUserId));
  }

  /** Applies a merge patch atomically (jsonb ||), so concurrent patches of different fields both survive. */
  async mergePreferences(
    identityUserId: string,
    patch: StoredPreferences,
    now: Date,
  ): Promise<AccountRow | undefined> {
    const [row] = await this.db
      .update(accountsTable)
      .set({
        preferences: sql`${accountsTable.preferences} || ${JSON.stringify(patch)}::jsonb`,
        updatedAt: now,
      })
      .where(eq(accountsTable.identityUserId, identityUserId))
      .returning();
    return row;
  }

  /** Sets the deletion schedule once; a repeated request keeps the original times. */
  async scheduleDeletion(
    identityUserId: string,
    requestedAt: Date,
    purgeAt: Date,
  ): Promise<AccountRow | undefined> {
    await this.db
      .update(accountsTable)
      .set({ deletionRequestedAt: requestedAt, purgeAt, updatedAt: requestedAt })
      .where(
        and(eq(accountsTable.identityUserId, identityUserId), isNull(accountsTable.deletionRequestedAt)),
      );
    return this.find(identityUserId);
  }

  /** Locks up to `limit` accounts due for purge; rows another replica holds are skipped. */
  async lockDueForPurge(tx: AccountsTx, now: Date, limit: number): Promise<AccountRow[]> {
    return tx
      .select()
      .from(accountsTable)
      .where(lte(accountsTable.purgeAt, now))
      .orderBy(asc(accountsTable.purgeAt))
      .limit(limit)
      .for("update", { skipLocked: true });
  }

  async purge(tx: AccountsTx, account: AccountRow, now: Date): Promise<void> {
    await tx.delete(accountsTable).where(eq(accountsTable.identityUserId, account.identityUserId));
    await tx
      .insert(purgedAccountsTable)
      .values({
        identityUserId: account.identityUserId,
        deletionRequestedAt: account.deletionRequestedAt ?? now,
        purgedAt: now,
        nextDisableAt: now,
      })
      .onConflictDoNothing();
  }

  async lockIdentitiesToDisable(tx: AccountsTx, now: Date, limit: number): Promise<PurgedAccountRow[]> {
    return tx
      .select()
      .from(purgedAccountsTable)
      .where(and(isNull(purgedAccountsTable.identityDisabledAt), lte(purgedAccountsTable.nextDisableAt, now)))
      .orderBy(asc(purgedAccountsTable.nextDisableAt))
      .limit(limit)
      .for("update", { skipLocked: true });
  }

  async markIdentityDisabled(tx: AccountsTx, identityUserId: string, now: Date): Promise<void> {
    await tx
      .update(purgedAccountsTable)
      .set({ identityDisabledAt: now, lastError: null })
      .where(eq(purgedAccountsTable.identityUserId, identityUserId));
  }

  async recordDisableFailure(
    tx: AccountsTx,
    row: PurgedAccountRow,
    error: string,
    retryAt: Date,
  ): Promise<void> {
    await tx
      .update(purgedAccountsTable)
      .set({
        disableAttempts: row.disableAttempts + 1,
        lastError: error.slice(0, 500),
        nextDisableAt: retryAt,
      })
      .where(eq(purgedAccountsTable.identityUserId, row.identityUserId));
  }

  async findPurged(identityUserId: string): Promise<PurgedAccountRow | undefined> {
    const [row] = await this.db
      .select()
      .from(purgedAccountsTable)
      .where(eq(purgedAccountsTable.identityUserId, identityUserId));
    return row;
  }
}
