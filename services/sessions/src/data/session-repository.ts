import { and, desc, eq, inArray, isNotNull, isNull, lt, or, sql } from "drizzle-orm";
import type { Database, Transaction } from "@cgs/shared";
import type * as schema from "./schema";
import {
  activeStates,
  currentStates,
  idempotencyKeysTable,
  pairingPinsTable,
  sessionsTable,
  volumesTable,
  type SessionRow,
  type SpendLimitStop,
  type StoredSessionState,
  type VolumeRow,
} from "./session-tables";

export type SessionsDb = Database<typeof schema>;
export type SessionsTx = Transaction<typeof schema>;
type Executor = SessionsDb | SessionsTx;

/** True for PostgreSQL's unique_violation, whether raw or wrapped by drizzle. */
export function isUniqueViolation(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && depth < 4; depth += 1) {
    if ((e as { code?: unknown }).code === "23505") return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

function latestSessionQuery(db: Executor) {
  return db
    .select()
    .from(sessionsTable)
    .where(eq(sessionsTable.accountId, sql.placeholder("accountId")))
    .orderBy(desc(sessionsTable.createdAt))
    .limit(1)
    .prepare("sessions_latest_for_account");
}

// Built once per database (or transaction): every poll runs this, and building the SQL cost more than running it.
const latestSessionQueries = new WeakMap<Executor, ReturnType<typeof latestSessionQuery>>();

export async function findLatestSession(db: Executor, accountId: string): Promise<SessionRow | undefined> {
  let query = latestSessionQueries.get(db);
  if (!query) latestSessionQueries.set(db, (query = latestSessionQuery(db)));
  const rows = await query.execute({ accountId });
  return rows[0];
}

export async function findActiveSession(
  db: Executor,
  accountId: string,
  options: { forUpdate?: boolean } = {},
): Promise<SessionRow | undefined> {
  const query = db
    .select()
    .from(sessionsTable)
    .where(and(eq(sessionsTable.accountId, accountId), inArray(sessionsTable.state, [...currentStates])))
    .limit(1);
  const rows = options.forUpdate ? await query.for("update") : await query;
  return rows[0];
}

export async function findSession(db: Executor, id: string): Promise<SessionRow | undefined> {
  const rows = await db.select().from(sessionsTable).where(eq(sessionsTable.id, id)).limit(1);
  return rows[0];
}

/** Of these session ids, those whose session is active (starting, running, stopping). */
export async function findActiveSessionIds(db: Executor, ids: readonly string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await db
    .select({ id: sessionsTable.id })
    .from(sessionsTable)
    .where(and(inArray(sessionsTable.id, [...ids]), inArray(sessionsTable.state, [...activeStates])));
  return new Set(rows.map((r) => r.id));
}

export type NewSession = typeof sessionsTable.$inferInsert;

/** Inserts a starting session; undefined when the account already has an active one (the partial unique index). */
export async function insertStartingSession(
  db: Executor,
  values: NewSession,
): Promise<SessionRow | undefined> {
  try {
    const rows = await db.insert(sessionsTable).values(values).returning();
    return rows[0];
  } catch (err) {
    if (isUniqueViolation(err)) return undefined;
    throw err;
  }
}

export async function deleteSession(db: Executor, id: string): Promise<void> {
  await db.delete(sessionsTable).where(eq(sessionsTable.id, id));
}

/** Applies `changes` only while the session is still in `expected`; undefined when it moved on meanwhile. */
export async function updateSessionIf(
  db: Executor,
  id: string,
  expected: StoredSessionState | readonly StoredSessionState[],
  changes: Partial<NewSession>,
): Promise<SessionRow | undefined> {
  const states = typeof expected === "string" ? [expected] : [...expected];
  const rows = await db
    .update(sessionsTable)
    .set({ ...changes, updatedAt: new Date() })
    .where(and(eq(sessionsTable.id, id), inArray(sessionsTable.state, states)))
    .returning();
  return rows[0];
}

/**
 * Billing's forecast, made at `madeAt`, of when it stops paying for this session (null: it pays on), and the
 * spending limit that stop is for (null: the balance). A forecast older than the one stored changes nothing.
 */
export async function setCreditsStopAt(
  db: Executor,
  sessionId: string,
  at: Date | null,
  madeAt: Date,
  limit: SpendLimitStop | null = null,
): Promise<void> {
  await db
    .update(sessionsTable)
    .set({ creditsStopAt: at, creditsForecastAt: madeAt, creditsStopLimit: at ? limit : null })
    .where(
      and(
        eq(sessionsTable.id, sessionId),
        inArray(sessionsTable.state, ["starting", "running"]),
        or(isNull(sessionsTable.creditsForecastAt), lt(sessionsTable.creditsForecastAt, madeAt)),
      ),
    );
}

/**
 * Leases up to `limit` active sessions whose lease is free to `owner` for `leaseMs`. SKIP LOCKED plus the
 * lease keeps replicas off each other's sessions, and a crashed replica's lease simply runs out.
 */
export async function claimActiveSessions(
  db: SessionsDb,
  owner: string,
  limit: number,
  leaseMs: number,
): Promise<SessionRow[]> {
  const free = db
    .select({ id: sessionsTable.id })
    .from(sessionsTable)
    .where(
      and(
        inArray(sessionsTable.state, [...activeStates]),
        or(isNull(sessionsTable.leaseUntil), lt(sessionsTable.leaseUntil, sql`now()`)),
      ),
    )
    .orderBy(sql`${sessionsTable.leaseUntil} asc nulls first`)
    .limit(limit)
    .for("update", { skipLocked: true });
  return db
    .update(sessionsTable)
    .set({
      leaseUntil: sql`now() + make_interval(secs => ${leaseMs / 1000})`,
      leaseOwner: owner,
    })
    .where(inArray(sessionsTable.id, free))
    .returning();
}

export async function releaseLeases(db: SessionsDb, owner: string, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  await db
    .update(sessionsTable)
    // An expired lease rather than none: claims take the longest-unvisited sessions first, so a batch
    // smaller than the fleet still visits every session in turn.
    .set({ leaseUntil: sql`now()`, leaseOwner: null })
    .where(and(inArray(sessionsTable.id, ids), eq(sessionsTable.leaseOwner, owner)));
}

/**
 * Records that these running sessions' instances were seen running at `at`: one statement for a whole
 * reconciler batch, not one write per session. A session that left running meanwhile is left alone.
 */
export async function markSeenRunning(db: Executor, ids: readonly string[], at: Date): Promise<void> {
  if (ids.length === 0) return;
  await db
    .update(sessionsTable)
    .set({ seenRunningAt: at })
    .where(
      and(sql`${sessionsTable.id} = any(${sql.param([...ids])}::uuid[])`, eq(sessionsTable.state, "running")),
    );
}

export interface AttentionWindows {
  now: Date;
  minuteMs: number;
  idleLeadMs: number;
  lengthLeadMs: number;
  hostStaleMs: number;
}

/** When a session's instance came up (its launch time until then): the base of the idle and length clocks. */
const running = sql`coalesce(${sessionsTable.runningAt}, ${sessionsTable.createdAt})`;

/**
 * Running sessions an automatic stop may be near for: an idle, maximum-length or silent-host warning window has
 * begun, billing forecast the credit's end, or a warning was counted before. A superset: the domain decides.
 */
export async function findSessionsNeedingAttention(
  db: SessionsDb,
  w: AttentionWindows,
  limit: number,
): Promise<SessionRow[]> {
  const ms = (expr: ReturnType<typeof sql>) => sql`(${expr}) * interval '1 millisecond'`;
  const now = sql`${w.now.toISOString()}::timestamptz`;
  const idleMs = sql`${sessionsTable.idleTimeoutMinutes}::float8 * ${w.minuteMs}`;
  // greatest() skips nulls: with no Keep playing yet, the idle clock runs from the last play (or the running time);
  // with none of the player's devices on the private network, a connected client stops counting (play-state's
  // idleBase).
  const seen = sql`coalesce(${sessionsTable.playSeenAt}, ${running})`;
  const play = sql`case when ${sessionsTable.deviceAbsentSince} is null then ${seen}
    else greatest(${running}, ${sessionsTable.inputSeenAt}, least(${seen}, ${sessionsTable.deviceAbsentSince})) end`;
  const idleFrom = sql`greatest(${play}, ${sessionsTable.keptAliveAt})`;
  const lengthMs = sql`${sessionsTable.maxLengthMinutes}::float8 * ${w.minuteMs}`;
  const totalLengthMs = sql`(${sessionsTable.maxLengthMinutes} + ${sessionsTable.lengthExtendedMinutes})::float8 * ${w.minuteMs}`;
  return db
    .select()
    .from(sessionsTable)
    .where(
      and(
        eq(sessionsTable.state, "running"),
        or(
          isNotNull(sessionsTable.warnedKind),
          isNotNull(sessionsTable.creditsStopAt),
          sql`${idleFrom} + ${ms(sql`${idleMs} - least(${w.idleLeadMs}::float8, ${idleMs} / 2)`)} <= ${now}`,
          sql`${running} + ${ms(sql`${totalLengthMs} - least(${w.lengthLeadMs}::float8, ${lengthMs} / 2)`)} <= ${now}`,
          and(
            eq(sessionsTable.ready, true),
            sql`coalesce(${sessionsTable.hostSeenAt}, ${running}) + ${ms(sql`${w.hostStaleMs}::float8`)} <= ${now}`,
          ),
        ),
      ),
    )
    .limit(limit);
}

/**
 * Running sessions kept alive only by a connected streaming client (no input for `quietMs`), or already marked with
 * no device on the private network, whose devices were not asked about in the last `recheckMs`: the play sweep
 * asks the private network about them.
 */
export async function findClientOnlySessions(
  db: SessionsDb,
  w: { now: Date; quietMs: number; recheckMs: number },
  limit: number,
): Promise<SessionRow[]> {
  const at = (msAgo: number) => new Date(w.now.getTime() - msAgo).toISOString();
  return db
    .select()
    .from(sessionsTable)
    .where(
      and(
        eq(sessionsTable.state, "running"),
        eq(sessionsTable.ready, true),
        or(
          isNotNull(sessionsTable.deviceAbsentSince),
          and(
            sql`${sessionsTable.clientsConnected} > 0`,
            sql`coalesce(${sessionsTable.inputSeenAt}, ${running}) <= ${at(w.quietMs)}::timestamptz`,
          ),
        ),
        or(
          isNull(sessionsTable.presenceCheckedAt),
          sql`${sessionsTable.presenceCheckedAt} <= ${at(w.recheckMs)}::timestamptz`,
        ),
      ),
    )
    .orderBy(sql`${sessionsTable.presenceCheckedAt} nulls first`)
    .limit(limit);
}

/** Ready sessions' report ages in seconds at `now`: the oldest, the median, and how many exceed `staleMs`. */
export async function hostReportAges(
  db: Executor,
  now: Date,
  staleMs: number,
): Promise<{ max: number; p50: number; silent: number }> {
  const age = sql`extract(epoch from (${now.toISOString()}::timestamptz - coalesce(${sessionsTable.hostSeenAt}, ${sessionsTable.runningAt}, ${sessionsTable.createdAt})))`;
  const rows = await db
    .select({
      max: sql<number | null>`max(${age})::float8`,
      p50: sql<number | null>`percentile_cont(0.5) within group (order by ${age})::float8`,
      silent: sql<number>`count(*) filter (where ${age} * 1000 > ${staleMs})::int`,
    })
    .from(sessionsTable)
    .where(and(eq(sessionsTable.state, "running"), eq(sessionsTable.ready, true)));
  const r = rows[0];
  return { max: Number(r?.max ?? 0), p50: Number(r?.p50 ?? 0), silent: Number(r?.silent ?? 0) };
}

// ---------- volumes ----------

/** The account's volume in `region` (a volume cannot leave its region). */
export async function findVolume(
  db: Executor,
  accountId: string,
  region: string,
): Promise<VolumeRow | undefined> {
  const rows = await db
    .select()
    .from(volumesTable)
    .where(and(eq(volumesTable.accountId, accountId), eq(volumesTable.region, region)))
    .limit(1);
  return rows[0];
}

/** Saves a newly created volume; returns the row that won when another start created one first. */
export async function saveVolume(db: Executor, volume: typeof volumesTable.$inferInsert): Promise<VolumeRow> {
  const inserted = await db.insert(volumesTable).values(volume).onConflictDoNothing().returning();
  if (inserted[0]) return inserted[0];
  const existing = await findVolume(db, volume.accountId, volume.region);
  if (!existing) throw new Error("volume row vanished");
  return existing;
}

export async function requestVolumeDeletion(db: Executor, accountId: string): Promise<void> {
  await db
    .update(volumesTable)
    .set({ deleteRequestedAt: new Date() })
    .where(and(eq(volumesTable.accountId, accountId), isNull(volumesTable.deleteRequestedAt)));
}

export async function volumesPendingDeletion(db: SessionsDb, limit: number): Promise<VolumeRow[]> {
  return db.select().from(volumesTable).where(isNotNull(volumesTable.deleteRequestedAt)).limit(limit);
}

/** Forgets the account's volumes (only that one, when `volumeId` is given: a newer one is kept). */
export async function deleteVolumeRow(db: Executor, accountId: string, volumeId?: string): Promise<void> {
  await db
    .delete(volumesTable)
    .where(
      volumeId
        ? and(eq(volumesTable.accountId, accountId), eq(volumesTable.volumeId, volumeId))
        : eq(volumesTable.accountId, accountId),
    );
}

// ---------- idempotency keys ----------

/**
 * Claims (accountId, key) for a new start. Returns "claimed", or the stored response of an earlier start
 * (`null` while that one is still in flight). A key older than the TTL is reclaimed.
 */
export async function claimIdempotencyKey(
  db: SessionsDb,
  accountId: string,
  key: string,
  ttlHours: number,
): Promise<{ claimed: true } | { claimed: false; response: unknown }> {
  const claimed = await db
    .insert(idempotencyKeysTable)
    .values({ accountId, key })
    .onConflictDoUpdate({
      target: [idempotencyKeysTable.accountId, idempotencyKeysTable.key],
      set: { response: null, createdAt: sql`now()` },
      where: lt(idempotencyKeysTable.createdAt, sql`now() - make_interval(hours => ${ttlHours})`),
    })
    .returning({ key: idempotencyKeysTable.key });
  if (claimed.length > 0) return { claimed: true };
  const rows = await db
    .select({ response: idempotencyKeysTable.response })
    .from(idempotencyKeysTable)
    .where(and(eq(idempotencyKeysTable.accountId, accountId), eq(idempotencyKeysTable.key, key)))
    .limit(1);
  return { claimed: false, response: rows[0]?.response ?? null };
}

export async function saveIdempotentResponse(
  db: SessionsDb,
  accountId: string,
  key: string,
  response: unknown,
): Promise<void> {
  await db
    .update(idempotencyKeysTable)
    .set({ response })
    .where(and(eq(idempotencyKeysTable.accountId, accountId), eq(idempotencyKeysTable.key, key)));
}

export async function forgetIdempotencyKey(db: SessionsDb, accountId: string, key: string): Promise<void> {
  await db
    .delete(idempotencyKeysTable)
    .where(and(eq(idempotencyKeysTable.accountId, accountId), eq(idempotencyKeysTable.key, key)));
}

/** Keys older than the TTL are answered as new anyway; this only reclaims their rows. */
export async function deleteExpiredIdempotencyKeys(db: SessionsDb, ttlHours: number): Promise<void> {
  await db
    .delete(idempotencyKeysTable)
    .where(lt(idempotencyKeysTable.createdAt, sql`now() - make_interval(hours => ${ttlHours})`));
}

// ---------- pairing PINs ----------

export async function savePinDigest(
  db: Executor,
  sessionId: string,
  pinDigest: string,
  expiresAt: Date,
): Promise<void> {
  await db
    .insert(pairingPinsTable)
    .values({ sessionId, pinDigest, expiresAt })
    .onConflictDoUpdate({
      target: pairingPinsTable.sessionId,
      set: { pinDigest, expiresAt, createdAt: sql`now()` },
    });
}

export async function deleteExpiredPins(db: SessionsDb): Promise<void> {
  await db.delete(pairingPinsTable).where(lt(pairingPinsTable.expiresAt, sql`now()`));
}

/** Sessions in each active state (ended ones accumulate forever, so they are not counted here). */
export async function countActiveSessionsByState(db: Executor): Promise<Map<StoredSessionState, number>> {
  const rows = await db
    .select({ state: sessionsTable.state, count: sql<number>`count(*)::int` })
    .from(sessionsTable)
    .where(inArray(sessionsTable.state, [...currentStates]))
    .groupBy(sessionsTable.state);
  return new Map(rows.map((r) => [r.state, Number(r.count)]));
}
