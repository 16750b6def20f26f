import { and, asc, eq, gte, inArray, isNotNull, isNull, sql } from "drizzle-orm";
import { updateSessionIf, type SessionsDb, type SessionsTx } from "./session-repository";
import {
  poolInstancesTable,
  poolKeeperLeasesTable,
  type PoolInstanceRow,
  type PoolState,
} from "./pool-tables";
import { activeStates, sessionsTable, type SessionRow } from "./session-tables";

type Executor = SessionsDb | SessionsTx;

export async function insertPoolSlot(
  db: SessionsDb,
  slot: { id: string; region: string; availabilityZone: string; at: Date },
): Promise<void> {
  await db.insert(poolInstancesTable).values({
    id: slot.id,
    region: slot.region,
    availabilityZone: slot.availabilityZone,
    state: "launching",
    stateSince: slot.at,
    createdAt: slot.at,
  });
}

export async function listPool(db: SessionsDb, availabilityZone: string): Promise<PoolInstanceRow[]> {
  return db
    .select()
    .from(poolInstancesTable)
    .where(eq(poolInstancesTable.availabilityZone, availabilityZone))
    .orderBy(asc(poolInstancesTable.stateSince));
}

/** Moves a slot on when it is still in `from`; false when another tick got there first. */
export async function movePoolSlot(
  db: SessionsDb,
  id: string,
  from: PoolState | readonly PoolState[],
  changes: Partial<typeof poolInstancesTable.$inferInsert>,
): Promise<boolean> {
  const states = typeof from === "string" ? [from] : [...from];
  const rows = await db
    .update(poolInstancesTable)
    .set(changes)
    .where(and(eq(poolInstancesTable.id, id), inArray(poolInstancesTable.state, states)))
    .returning({ id: poolInstancesTable.id });
  return rows.length > 0;
}

export async function deletePoolSlot(db: SessionsDb, id: string): Promise<void> {
  await db.delete(poolInstancesTable).where(eq(poolInstancesTable.id, id));
}

/**
 * Takes one instance of the pool for a session, in one statement: the slot's row goes (so no other start and no
 * pool tick can have it) and is returned. Hot instances must have reported standby with their assignment
 * endpoint's certificate; the longest waiting goes first.
 */
async function claimPoolSlot(
  db: Executor,
  availabilityZone: string,
  state: "hot" | "warm",
): Promise<PoolInstanceRow | undefined> {
  const candidate = db
    .select({ id: poolInstancesTable.id })
    .from(poolInstancesTable)
    .where(
      and(
        eq(poolInstancesTable.availabilityZone, availabilityZone),
        eq(poolInstancesTable.state, state),
        isNotNull(poolInstancesTable.instanceId),
        isNotNull(poolInstancesTable.assignCertSha256),
      ),
    )
    .orderBy(asc(poolInstancesTable.stateSince))
    .limit(1)
    .for("update", { skipLocked: true });
  const rows = await db
    .delete(poolInstancesTable)
    .where(inArray(poolInstancesTable.id, candidate))
    .returning();
  return rows[0];
}

/**
 * A starting session takes a pool instance: the slot's row goes and the session names the instance and the slot in
 * the same transaction, so at every moment a pool instance is either in the pool or some session's (the pool keeper
 * terminates one that is neither). Undefined when none is free, or when the session is no longer starting (the slot
 * then stays in the pool).
 */
export async function claimPoolInstance(
  db: SessionsDb,
  sessionId: string,
  availabilityZone: string,
  kind: "hot" | "warm",
): Promise<{ slot: PoolInstanceRow; session: SessionRow } | undefined> {
  const notStarting = new Error("session no longer starting");
  try {
    return await db.transaction(async (tx) => {
      const slot = await claimPoolSlot(tx, availabilityZone, kind);
      if (!slot) return undefined;
      const session = await updateSessionIf(tx, sessionId, "starting", {
        instanceId: slot.instanceId,
        capacity: kind,
        poolId: slot.id,
        poolAssignCertSha256: slot.assignCertSha256,
        // A hot instance's agent is up and waiting now; a warm one reports again once it is started.
        poolStandbyAt: kind === "hot" ? slot.standbyAt : null,
      });
      if (!session) throw notStarting;
      return { slot, session };
    });
  } catch (err) {
    if (err === notStarting) return undefined;
    throw err;
  }
}

/** The claimed pool instance could not serve (and was terminated): the starting session names none again. */
export async function releaseClaim(db: SessionsDb, sessionId: string): Promise<void> {
  await updateSessionIf(db, sessionId, "starting", {
    instanceId: null,
    capacity: "cold",
    poolId: null,
    poolAssignCertSha256: null,
    poolStandbyAt: null,
  });
}

/** Pool slots (of `poolIds`) some active session claimed: their instances are that session's, not orphans. */
export async function claimedPoolIds(db: SessionsDb, poolIds: readonly string[]): Promise<Set<string>> {
  if (poolIds.length === 0) return new Set();
  const rows = await db
    .select({ poolId: sessionsTable.poolId })
    .from(sessionsTable)
    .where(and(inArray(sessionsTable.poolId, [...poolIds]), inArray(sessionsTable.state, [...activeStates])));
  return new Set(rows.map((r) => r.poolId!));
}

/**
 * A standby report from an instance a starting session claimed (a woken warm instance once it is up again): the
 * session may now hand it its assignment. False when no such session waits for it.
 */
export async function recordClaimedStandby(
  db: SessionsDb,
  report: { poolId: string; instanceId: string; at: Date },
): Promise<boolean> {
  const rows = await db
    .update(sessionsTable)
    .set({ poolStandbyAt: report.at })
    .where(
      and(
        eq(sessionsTable.poolId, report.poolId),
        eq(sessionsTable.instanceId, report.instanceId),
        eq(sessionsTable.state, "starting"),
        isNull(sessionsTable.assignedAt),
      ),
    )
    .returning({ id: sessionsTable.id });
  return rows.length > 0;
}

export async function findPoolSlot(db: SessionsDb, id: string): Promise<PoolInstanceRow | undefined> {
  const rows = await db.select().from(poolInstancesTable).where(eq(poolInstancesTable.id, id)).limit(1);
  return rows[0];
}

/**
 * A standby report from the slot's instance: the first since its (re)boot sets standbyAt; the assignment endpoint's
 * certificate is pinned from the first one ever. Older reports (seq) change nothing. False when nothing changed.
 */
export async function recordStandby(
  db: SessionsDb,
  report: { poolId: string; instanceId: string; seq: number; assignCertSha256: string | null; at: Date },
): Promise<boolean> {
  const rows = await db
    .update(poolInstancesTable)
    .set({
      reportSeq: report.seq,
      standbyAt: sql`coalesce(${poolInstancesTable.standbyAt}, ${report.at.toISOString()}::timestamptz)`,
      assignCertSha256: sql`coalesce(${poolInstancesTable.assignCertSha256}, ${report.assignCertSha256})`,
    })
    .where(
      and(
        eq(poolInstancesTable.id, report.poolId),
        eq(poolInstancesTable.instanceId, report.instanceId),
        sql`${poolInstancesTable.reportSeq} < ${report.seq}`,
      ),
    )
    .returning({ id: poolInstancesTable.id });
  return rows.length > 0;
}

/** Starts in a region since then, as its pool sizes itself from them. */
export async function countStartsSince(db: SessionsDb, since: Date, region: string): Promise<number> {
  const rows = await db
    .select({ n: sql<number>`count(*)::int` })
    .from(sessionsTable)
    .where(and(gte(sessionsTable.createdAt, since), eq(sessionsTable.region, region)));
  return Number(rows[0]?.n ?? 0);
}

/** Start-to-ready of the latest ready sessions of each kind of capacity, in ms (the phase estimates). */
export async function recentStartToReady(
  db: SessionsDb,
  since: Date,
): Promise<Record<"hot" | "warm" | "cold", number[]>> {
  const rows = await db
    .select({
      capacity: sessionsTable.capacity,
      ms: sql<number>`(extract(epoch from (${sessionsTable.readyAt} - ${sessionsTable.createdAt})) * 1000)::float8`,
    })
    .from(sessionsTable)
    .where(and(isNotNull(sessionsTable.readyAt), gte(sessionsTable.readyAt, since)))
    .orderBy(sql`${sessionsTable.readyAt} desc`)
    .limit(300);
  const out: Record<"hot" | "warm" | "cold", number[]> = { hot: [], warm: [], cold: [] };
  for (const r of rows) out[r.capacity].push(Number(r.ms));
  return out;
}

/**
 * Takes or renews the lease on keeping a zone's pool: true when `owner` holds it now (it was free, expired, or
 * already this owner's). One keeper per zone at a time, without holding a connection between ticks.
 */
export async function leasePoolKeeping(
  db: SessionsDb,
  availabilityZone: string,
  owner: string,
  now: Date,
  ttlMs: number,
): Promise<boolean> {
  const expiresAt = new Date(now.getTime() + ttlMs);
  const rows = await db
    .insert(poolKeeperLeasesTable)
    .values({ availabilityZone, owner, expiresAt })
    .onConflictDoUpdate({
      target: poolKeeperLeasesTable.availabilityZone,
      set: { owner, expiresAt },
      setWhere: sql`${poolKeeperLeasesTable.owner} = ${owner} or ${poolKeeperLeasesTable.expiresAt} < ${now.toISOString()}::timestamptz`,
    })
    .returning({ owner: poolKeeperLeasesTable.owner });
  return rows.length > 0;
}
