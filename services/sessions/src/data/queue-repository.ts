import { and, asc, eq, gt, isNotNull, lt, ne, sql } from "drizzle-orm";
import { updateSessionIf, type SessionsDb, type SessionsTx } from "./session-repository";
import { regionCapacityTable, sessionsTable, type SessionRow } from "./session-tables";

type Executor = SessionsDb | SessionsTx;

const waitsFor = (region: string) => sql`${region} = any(${sessionsTable.queueRegions})`;
const queued = eq(sessionsTable.state, "queued");

/**
 * A starting session that found every allowed region full joins the line: no machine, no hold. Its place is its
 * `queued_at`, kept across restarts (the row is the queue).
 */
export async function joinQueue(
  db: Executor,
  sessionId: string,
  regions: readonly string[],
  storageGb: number,
  at: Date,
  message: string,
): Promise<SessionRow | undefined> {
  return updateSessionIf(db, sessionId, "starting", {
    state: "queued",
    region: regions[0]!,
    queueRegions: [...regions],
    queuedAt: at,
    queueStorageGb: storageGb,
    authorizationId: null,
    message,
  });
}

/** How many queued sessions that wait for `region` joined before this one (ties broken by id). */
export async function sessionsAhead(db: Executor, row: SessionRow, region: string): Promise<number> {
  const rows = await db
    .select({ n: sql<number>`count(*)::int` })
    .from(sessionsTable)
    .where(
      and(
        queued,
        waitsFor(region),
        sql`(${sessionsTable.queuedAt}, ${sessionsTable.id}) < (${row.queuedAt!.toISOString()}::timestamptz, ${row.id}::uuid)`,
      ),
    );
  return Number(rows[0]?.n ?? 0);
}

/** Queued sessions waiting for each region (a session waiting for two counts in both). */
export async function queueLengths(db: Executor): Promise<Map<string, number>> {
  const rows = await db
    .select({
      region: sql<string>`r.region`,
      n: sql<number>`count(*)::int`,
    })
    .from(sql`${sessionsTable}, unnest(${sessionsTable.queueRegions}) as r(region)`)
    .where(queued)
    .groupBy(sql`r.region`);
  return new Map(rows.map((r) => [r.region, Number(r.n)]));
}

/** The first in line for `region`: the earliest queued session that allowed it. */
export async function queueHead(db: Executor, region: string): Promise<SessionRow | undefined> {
  const rows = await db
    .select()
    .from(sessionsTable)
    .where(and(queued, waitsFor(region)))
    .orderBy(asc(sessionsTable.queuedAt), asc(sessionsTable.id))
    .limit(1);
  return rows[0];
}

/** Takes a queued session out of the line to start it in `region`; undefined when it left (or another region took it). */
export async function leaveQueueToStart(
  db: Executor,
  sessionId: string,
  region: string,
  at: Date,
): Promise<SessionRow | undefined> {
  return updateSessionIf(db, sessionId, "queued", {
    state: "starting",
    region,
    createdAt: at,
    message: null,
  });
}

/** The start found `region` full after all: back in line at the same place. */
export async function returnToQueue(db: Executor, row: SessionRow, message: string): Promise<boolean> {
  const back = await updateSessionIf(db, row.id, "starting", {
    state: "queued",
    region: row.queueRegions?.[0] ?? row.region,
    message,
  });
  return back !== undefined;
}

/** Queued sessions that joined before `before` (they have waited as long as the service lets them). */
export async function queuedSince(db: Executor, before: Date, limit: number): Promise<SessionRow[]> {
  return db
    .select()
    .from(sessionsTable)
    .where(and(queued, lt(sessionsTable.queuedAt, before)))
    .orderBy(asc(sessionsTable.queuedAt))
    .limit(limit);
}

/** When sessions waiting for `region` left the line for a machine there since `since`, oldest first. */
export async function admissionTimes(db: Executor, region: string, since: Date): Promise<Date[]> {
  const rows = await db
    .select({ at: sessionsTable.createdAt })
    .from(sessionsTable)
    .where(
      and(
        eq(sessionsTable.region, region),
        isNotNull(sessionsTable.queuedAt),
        ne(sessionsTable.state, "queued"),
        gt(sessionsTable.createdAt, since),
      ),
    )
    .orderBy(asc(sessionsTable.createdAt));
  return rows.map((r) => r.at);
}

// ---------- regions found full ----------

export async function markRegionFull(db: Executor, region: string, until: Date): Promise<void> {
  await db
    .insert(regionCapacityTable)
    .values({ region, fullUntil: until })
    .onConflictDoUpdate({ target: regionCapacityTable.region, set: { fullUntil: until } });
}

export async function clearRegionFull(db: Executor, region: string): Promise<void> {
  await db.delete(regionCapacityTable).where(eq(regionCapacityTable.region, region));
}

/** Regions whose last launch found no capacity, and for how long they count as full. */
export async function regionsFull(db: Executor, now: Date): Promise<Set<string>> {
  const rows = await db
    .select({ region: regionCapacityTable.region })
    .from(regionCapacityTable)
    .where(gt(regionCapacityTable.fullUntil, now));
  return new Set(rows.map((r) => r.region));
}
