import { sql } from "drizzle-orm";
import {
  bigint,
  boolean,
  check,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from "drizzle-orm/pg-core";

/** A spending limit billing stops a session at: the UTC day's or month's, in minor units of `currency`. */
export interface SpendLimitStop {
  period: "day" | "month";
  amount: number;
  currency: string;
}

export const sessionStates = ["queued", "starting", "running", "stopping", "stopped", "failed"] as const;
export type StoredSessionState = (typeof sessionStates)[number];
/** States with a machine (or one coming): what the reconciler moves along. A queued session has none yet. */
export const activeStates: readonly StoredSessionState[] = ["starting", "running", "stopping"];
/** The account's one current session: active, or waiting in line for a machine (the partial unique index). */
export const currentStates: readonly StoredSessionState[] = ["queued", ...activeStates];

/**
 * One row per started session. At most one active (starting, running, stopping) row per account, enforced
 * by a partial unique index so concurrent starts cannot both win. `lease_until`/`lease_owner` are the
 * reconciler's claim, so several replicas never handle the same session at once.
 */
export const sessionsTable = pgTable(
  "sessions",
  {
    id: uuid("id").primaryKey(),
    accountId: text("account_id").notNull(),
    state: text("state").$type<StoredSessionState>().notNull(),
    /** The region it runs in; while queued, the first region it waits for (`queue_regions` has them all). */
    region: text("region").notNull(),
    /** When it joined the line (first come, first served per region); kept once it starts. */
    queuedAt: timestamp("queued_at", { withTimezone: true }),
    /** The regions a queued session waits for, in the order its start gave. */
    queueRegions: text("queue_regions").array(),
    /** The storage tier's volume size billing named when it joined the line (for a volume made at admission). */
    queueStorageGb: integer("queue_storage_gb"),
    instanceId: text("instance_id"),
    publicIp: text("public_ip"),
    privateNetIp: text("private_net_ip"),
    ready: boolean("ready").notNull().default(false),
    message: text("message"),
    volumeId: text("volume_id"),
    volumeAttached: boolean("volume_attached").notNull().default(false),
    ratePerMinute: integer("rate_per_minute").notNull(),
    currency: text("currency").notNull(),
    authorizationId: text("authorization_id"),
    /** Where its instance came from: a hot or warm pool instance, or a cold launch. */
    capacity: text("capacity").$type<"hot" | "warm" | "cold">().notNull().default("cold"),
    /** The pool slot of a claimed pool instance (its key signs the assignment) and the endpoint it pinned. */
    poolId: uuid("pool_id"),
    poolAssignCertSha256: text("pool_assign_cert_sha256"),
    /** When the claimed pool instance's agent was last seen waiting (a woken warm one reports again once up). */
    poolStandbyAt: timestamp("pool_standby_at", { withTimezone: true }),
    /** When a claimed pool instance took the session's secrets (a cold launch has them in its user data). */
    assignedAt: timestamp("assigned_at", { withTimezone: true }),
    /** When the streaming host first answered: start-to-ready is readyAt - createdAt. */
    readyAt: timestamp("ready_at", { withTimezone: true }),
    idleTimeoutMinutes: integer("idle_timeout_minutes").notNull(),
    /** The account's maximum session length at start; keepalives in its warning add `lengthExtendedMinutes`. */
    maxLengthMinutes: integer("max_length_minutes").notNull().default(720),
    lengthExtendedMinutes: integer("length_extended_minutes").notNull().default(0),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
    /** When the instance was launched and metering began (session.started); null before. */
    startedAt: timestamp("started_at", { withTimezone: true }),
    runningAt: timestamp("running_at", { withTimezone: true }),
    /**
     * The last reconciler pass that saw the instance running (taken before its describe call, so never after
     * the instance's real end). A lost instance is charged up to here, not up to when its loss was noticed.
     */
    seenRunningAt: timestamp("seen_running_at", { withTimezone: true }),
    stoppedAt: timestamp("stopped_at", { withTimezone: true }),
    stopReason: text("stop_reason"),
    endedAt: timestamp("ended_at", { withTimezone: true }),
    /**
     * Play, as the host agent saw it: the last time a streaming client was connected or the display had input.
     * Set to the running time when the instance comes up; API calls never move it.
     */
    playSeenAt: timestamp("play_seen_at", { withTimezone: true }),
    /** The last input the host agent saw on the display (play_seen_at also counts a connected client). */
    inputSeenAt: timestamp("input_seen_at", { withTimezone: true }),
    /**
     * Since when none of the player's devices has been on the private network while the host still counted a
     * streaming client: from then the client is not play (the second presence signal); null while one is there.
     */
    deviceAbsentSince: timestamp("device_absent_since", { withTimezone: true }),
    /** The last time the play sweep asked the private network about the player's devices. */
    presenceCheckedAt: timestamp("presence_checked_at", { withTimezone: true }),
    /** The player chose Keep playing: the idle clock starts again from here. */
    keptAliveAt: timestamp("kept_alive_at", { withTimezone: true }),
    clientsConnected: integer("clients_connected").notNull().default(0),
    /** The newest report the host agent delivered (when the host saw it) and its sequence number. */
    hostSeenAt: timestamp("host_seen_at", { withTimezone: true }),
    hostSeq: bigint("host_seq", { mode: "number" }).notNull().default(0),
    sunshineAnswers: boolean("sunshine_answers"),
    /** SHA-256 of the host's TLS certificate from its first report: every Sunshine call is pinned to it. */
    hostCertSha256: text("host_cert_sha256"),
    /** Billing's forecast of when the wallet can no longer pay for this session; null while it can. */
    creditsStopAt: timestamp("credits_stop_at", { withTimezone: true }),
    /** When billing made the forecast above: an older forecast arriving late (SQS does not order) is ignored. */
    creditsForecastAt: timestamp("credits_forecast_at", { withTimezone: true }),
    /** The spending limit that forecast's stop is for; null when the balance runs out first. */
    creditsStopLimit: jsonb("credits_stop_limit").$type<SpendLimitStop>(),
    /** The warning the sweep last counted (metrics count each warning once). */
    warnedKind: text("warned_kind"),
    leaseUntil: timestamp("lease_until", { withTimezone: true }),
    leaseOwner: text("lease_owner"),
    updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex("sessions_one_active_per_account")
      .on(t.accountId)
      .where(sql`${t.state} in ('queued', 'starting', 'running', 'stopping')`),
    index("sessions_queue_idx")
      .on(t.queuedAt, t.id)
      .where(sql`${t.state} = 'queued'`),
    // The play sweep's presence question (findClientOnlySessions): only ready sessions a client keeps alive.
    index("sessions_client_only_idx")
      .on(t.presenceCheckedAt)
      .where(
        sql`${t.state} = 'running' and ${t.ready} and (${t.deviceAbsentSince} is not null or ${t.clientsConnected} > 0)`,
      ),
    index("sessions_account_created_idx").on(t.accountId, t.createdAt),
    index("sessions_active_lease_idx")
      .on(t.leaseUntil)
      .where(sql`${t.state} in ('starting', 'running', 'stopping')`),
    check(
      "sessions_state_check",
      sql`${t.state} in ('queued', 'starting', 'running', 'stopping', 'stopped', 'failed')`,
    ),
    check("sessions_rate_check", sql`${t.ratePerMinute} >= 0`),
  ],
);

/**
 * The account's storage volume in a region: created on its first start there, kept across sessions, deleted on
 * account purge. A volume cannot leave its region, so an account that played in two regions has one in each.
 */
export const volumesTable = pgTable(
  "volumes",
  {
    accountId: text("account_id").notNull(),
    volumeId: text("volume_id").notNull(),
    region: text("region").notNull(),
    availabilityZone: text("availability_zone").notNull(),
    sizeGb: integer("size_gb").notNull(),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
    deleteRequestedAt: timestamp("delete_requested_at", { withTimezone: true }),
  },
  (t) => [primaryKey({ columns: [t.accountId, t.region] })],
);

/** A region whose last launch found no capacity: counted full (GET /regions) until `full_until`. */
export const regionCapacityTable = pgTable("region_capacity", {
  region: text("region").primaryKey(),
  fullUntil: timestamp("full_until", { withTimezone: true }).notNull(),
});

/** The first successful answer to a start carrying an Idempotency-Key; `response` is null while in flight. */
export const idempotencyKeysTable = pgTable(
  "idempotency_keys",
  {
    accountId: text("account_id").notNull(),
    key: text("key").notNull(),
    response: jsonb("response"),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.accountId, t.key] })],
);

/** The current pairing PIN of a session, kept only as an HMAC digest. */
export const pairingPinsTable = pgTable("pairing_pins", {
  sessionId: uuid("session_id").primaryKey(),
  pinDigest: text("pin_digest").notNull(),
  expiresAt: timestamp("expires_at", { withTimezone: true }).notNull(),
  createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
});

export type SessionRow = typeof sessionsTable.$inferSelect;
export type VolumeRow = typeof volumesTable.$inferSelect;
