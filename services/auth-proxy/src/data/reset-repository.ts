import { asc, eq, lte, sql } from "drizzle-orm";
import type { Database, Transaction } from "@cgs/shared";
import { resetRequestsTable, usedResetTokensTable } from "./reset-tables";
import type * as schema from "./schema";

export type AuthProxyDb = Database<typeof schema>;
export type AuthProxyTx = Transaction<typeof schema>;
export type ResetRequestRow = typeof resetRequestsTable.$inferSelect;

export class ResetRepository {
  constructor(private readonly db: AuthProxyDb) {}

  async enqueueRequest(email: string): Promise<void> {
    await this.db.insert(resetRequestsTable).values({ email });
  }

  /**
   * Claims the oldest waiting request for `leaseMs` (a replica that dies mid-way leaves it to be retried);
   * a row another replica is claiming is skipped. The claim is a short transaction of its own so no
   * database connection waits on the identity provider or SMTP.
   */
  async claimNextRequest(now: Date, leaseMs: number): Promise<ResetRequestRow | undefined> {
    return this.db.transaction(async (tx) => {
      const [row] = await tx
        .select()
        .from(resetRequestsTable)
        .where(lte(resetRequestsTable.availableAt, now))
        .orderBy(asc(resetRequestsTable.availableAt), asc(resetRequestsTable.id))
        .limit(1)
        .for("update", { skipLocked: true });
      if (!row) return undefined;
      const [claimed] = await tx
        .update(resetRequestsTable)
        .set({ attempts: row.attempts + 1, availableAt: new Date(now.getTime() + leaseMs) })
        .where(eq(resetRequestsTable.id, row.id))
        .returning();
      return claimed;
    });
  }

  async deleteRequest(id: number): Promise<void> {
    await this.db.delete(resetRequestsTable).where(eq(resetRequestsTable.id, id));
  }

  async deferRequest(id: number, error: string, retryAt: Date): Promise<void> {
    await this.db
      .update(resetRequestsTable)
      .set({ lastError: error.slice(0, 500), availableAt: retryAt })
      .where(eq(resetRequestsTable.id, id));
  }

  async pendingRequests(): Promise<number> {
    const [row] = await this.db.select({ n: sql<number>`count(*)::int` }).from(resetRequestsTable);
    return row?.n ?? 0;
  }

  /** Marks the token used; false when it already was (the unique key decides between racing completes). */
  async markTokenUsed(
    tx: AuthProxyTx,
    token: { jti: string; identityUserId: string; expiresAt: Date },
    now: Date,
  ): Promise<boolean> {
    const inserted = await tx
      .insert(usedResetTokensTable)
      .values({ ...token, usedAt: now })
      .onConflictDoNothing()
      .returning({ jti: usedResetTokensTable.jti });
    return inserted.length === 1;
  }

  /** Used-token rows are only needed until the token would have expired anyway. */
  async forgetExpiredTokens(now: Date): Promise<void> {
    await this.db.delete(usedResetTokensTable).where(lte(usedResetTokensTable.expiresAt, now));
  }
}
