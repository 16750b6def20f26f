import { bigint, index, pgTable, text, timestamp, uuid } from "drizzle-orm/pg-core";

export const poolStates = ["launching", "hot", "parking", "warm"] as const;
export type PoolState = (typeof poolStates)[number];

/**
 * Capacity waiting for players: instances launched for no session that booted the image once. `launching` until
 * its host agent reports standby (a woken warm instance goes back here), `hot` when kept running, `parking` while
 * being stopped, `warm` when stopped. A start claims one by deleting its row (hot first, then warm); the instance then
 * belongs to that session and is never reused for another: the pool launches a fresh one in its place.
 */
export const poolInstancesTable = pgTable(
  "pool_instances",
  {
    /** The pool slot: its key (derived from it) signs the standby agent's reports and the platform's assignment. */
    id: uuid("id").primaryKey(),
    region: text("region").notNull(),
    availabilityZone: text("availability_zone").notNull(),
    instanceId: text("instance_id"),
    state: text("state").$type<PoolState>().notNull(),
    stateSince: timestamp("state_since", { withTimezone: true }).notNull().defaultNow(),
    /** The first standby report since the last (re)boot: the image is up and the agent waits to be assigned. */
    standbyAt: timestamp("standby_at", { withTimezone: true }),
    reportSeq: bigint("report_seq", { mode: "number" }).notNull().default(0),
    /** The agent's assignment endpoint certificate, pinned from its first standby report. */
    assignCertSha256: text("assign_cert_sha256"),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index("pool_instances_state_idx").on(t.availabilityZone, t.state, t.stateSince)],
);

export type PoolInstanceRow = typeof poolInstancesTable.$inferSelect;

/** Which replica keeps a zone's pool: held for a while and renewed by each of its ticks, taken over once expired. */
export const poolKeeperLeasesTable = pgTable("pool_keeper_leases", {
  availabilityZone: text("availability_zone").primaryKey(),
  owner: text("owner").notNull(),
  expiresAt: timestamp("expires_at", { withTimezone: true }).notNull(),
});
