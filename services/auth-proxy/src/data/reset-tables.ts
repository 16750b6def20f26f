import { bigserial, index, integer, pgTable, text, timestamp, uuid } from "drizzle-orm/pg-core";

/** Reset tokens already used: the primary key makes each token single-use even when two completes race. */
export const usedResetTokensTable = pgTable("used_reset_tokens", {
  jti: uuid("jti").primaryKey(),
  identityUserId: text("identity_user_id").notNull(),
  usedAt: timestamp("used_at", { withTimezone: true }).notNull().defaultNow(),
  expiresAt: timestamp("expires_at", { withTimezone: true }).notNull(),
});

/**
 * Reset requests waiting for the account look-up and the e-mail, which happen off the request path so
 * the endpoint answers the same way, in the same time, for any address. Rows are deleted once handled.
 */
export const resetRequestsTable = pgTable(
  "reset_requests",
  {
    id: bigserial("id", { mode: "number" }).primaryKey(),
    email: text("email").notNull(),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
    attempts: integer("attempts").notNull().default(0),
    availableAt: timestamp("available_at", { withTimezone: true }).notNull().defaultNow(),
    lastError: text("last_error"),
  },
  (table) => [index("reset_requests_available_idx").on(table.availableAt, table.id)],
);
