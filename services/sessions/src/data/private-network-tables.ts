import { index, integer, pgTable, text, timestamp } from "drizzle-orm/pg-core";

export type PrivateNetworkKeyKind = "device" | "host";

/**
 * Every private-network key minted for an account: a player device's (counted against VPN_KEY_MAX_LIVE) or a
 * streaming host's. The control planes cannot list keys by account (Headscale 0.28 and Tailscale list the whole
 * tailnet), so the account's keys are looked up here, and an account purge revokes them from here.
 */
export const privateNetworkKeysTable = pgTable(
  "private_network_keys",
  {
    /** The control plane's id of the key (never the key itself); `pending:<uuid>` while it is being minted. */
    keyId: text("key_id").primaryKey(),
    accountId: text("account_id").notNull(),
    kind: text("kind").$type<PrivateNetworkKeyKind>().notNull(),
    /** The network tag the key carries (hosted Tailscale's slot tag), to find its devices again; null otherwise. */
    networkTag: text("network_tag"),
    expiresAt: timestamp("expires_at", { withTimezone: true }).notNull(),
    /** When a node was first seen joined with it (a used key no longer counts against the limit). */
    usedAt: timestamp("used_at", { withTimezone: true }),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index("private_network_keys_account_idx").on(t.accountId, t.expiresAt)],
);

/** Hosted Tailscale only: the slot tag each playing account holds (see shared/src/network/tailnet-policy.ts). */
export const privateNetworkSlotsTable = pgTable("private_network_slots", {
  slot: integer("slot").primaryKey(),
  accountId: text("account_id").notNull().unique(),
  leasedAt: timestamp("leased_at", { withTimezone: true }).notNull().defaultNow(),
});
