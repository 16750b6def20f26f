import { and, asc, eq, gte, inArray, isNotNull, sql } from "drizzle-orm";
import type { SessionsDb } from "./session-repository";
import { poolInstancesTable, type PoolInstanceRow, type PoolState } from "./pool-tables";
import { sessionsTable } from "./session-tables";

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
export async function claimPoolSlot(
  db: SessionsDb,
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

/** Starts per hour, as the pool sizes itself from them. */
export async function countStartsSince(db: SessionsDb, since: Date): Promise<number> {
  const rows = await db
    .select({ n: sql<number>`count(*)::int` })
    .from(sessionsTable)
    .where(gte(sessionsTable.createdAt, since));
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
