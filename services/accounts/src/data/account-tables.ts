import { sql } from "drizzle-orm";
import { check, index, integer, jsonb, pgTable, text, timestamp } from "drizzle-orm/pg-core";
import type { StoredPreferences } from "./stored-preferences";

/** One row per identity-provider user, created on the user's first authenticated request. */
export const accountsTable = pgTable(
  "accounts",
  {
    identityUserId: text("identity_user_id").primaryKey(),
    email: text("email"),
    /** Only the fields the user saved; reads fill the rest from the documented defaults. */
    preferences: jsonb("preferences").$type<StoredPreferences>().notNull().default({}),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
    deletionRequestedAt: timestamp("deletion_requested_at", { withTimezone: true }),
    purgeAt: timestamp("purge_at", { withTimezone: true }),
  },
  (table) => [
    check("accounts_deletion_pair", sql`(${table.deletionRequestedAt} is null) = (${table.purgeAt} is null)`),
    index("accounts_purge_due_idx")
      .on(table.purgeAt)
      .where(sql`${table.purgeAt} is not null`),
  ],
);

/**
 * Tombstones of purged accounts: a purged user's still-valid token cannot recreate the account, and the
 * identity-provider disable is retried here until it succeeds.
 */
export const purgedAccountsTable = pgTable(
  "purged_accounts",
  {
    identityUserId: text("identity_user_id").primaryKey(),
    deletionRequestedAt: timestamp("deletion_requested_at", { withTimezone: true }).notNull(),
    purgedAt: timestamp("purged_at", { withTimezone: true }).notNull(),
    identityDisabledAt: timestamp("identity_disabled_at", { withTimezone: true }),
    disableAttempts: integer("disable_attempts").notNull().default(0),
    nextDisableAt: timestamp("next_disable_at", { withTimezone: true }).notNull(),
    lastError: text("last_error"),
  },
  (table) => [
    index("purged_accounts_disable_due_idx")
      .on(table.nextDisableAt)
      .where(sql`${table.identityDisabledAt} is null`),
  ],
);

export type AccountRow = typeof accountsTable.$inferSelect;
export type PurgedAccountRow = typeof purgedAccountsTable.$inferSelect;
