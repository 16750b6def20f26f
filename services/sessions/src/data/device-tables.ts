import { index, pgTable, text, timestamp, uniqueIndex, uuid } from "drizzle-orm/pg-core";

/**
 * The account's paired streaming devices as the platform recorded them from its streaming host (Sunshine's client
 * list, whose state lives on the account's volume). A removed device stays until its unpairing reached a host
 * (`unpairedAt`): while no session runs it is applied when the next one's host comes up.
 */
export const devicesTable = pgTable(
  "devices",
  {
    id: uuid("id").primaryKey(),
    accountId: text("account_id").notNull(),
    /** Sunshine's id of the paired client (its certificate's uuid). */
    hostClientId: text("host_client_id").notNull(),
    name: text("name").notNull(),
    pairedAt: timestamp("paired_at", { withTimezone: true }).notNull(),
    /** The last time the account's host reported a streaming client while this device was paired. */
    lastUsedAt: timestamp("last_used_at", { withTimezone: true }),
    removedAt: timestamp("removed_at", { withTimezone: true }),
    unpairedAt: timestamp("unpaired_at", { withTimezone: true }),
  },
  (t) => [
    uniqueIndex("devices_account_host_client").on(t.accountId, t.hostClientId),
    index("devices_account_idx").on(t.accountId),
  ],
);

export type DeviceRow = typeof devicesTable.$inferSelect;
