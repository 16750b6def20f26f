import { randomUUID } from "node:crypto";
import { and, asc, eq, inArray, isNotNull, isNull, sql } from "drizzle-orm";
import type { SessionsDb } from "./session-repository";
import { devicesTable, type DeviceRow } from "./device-tables";
import { sessionsTable } from "./session-tables";

/** The account's paired devices, oldest first; removed ones are gone from the list at once. */
export async function listDevices(db: SessionsDb, accountId: string): Promise<DeviceRow[]> {
  return db
    .select()
    .from(devicesTable)
    .where(and(eq(devicesTable.accountId, accountId), isNull(devicesTable.removedAt)))
    .orderBy(asc(devicesTable.pairedAt), asc(devicesTable.id));
}

/**
 * Records the clients the host lists that the platform has not seen (paired now); one the player removed stays
 * removed. Returns the newly recorded devices.
 */
export async function recordHostClients(
  db: SessionsDb,
  accountId: string,
  clients: readonly { id: string; name: string }[],
  at: Date,
): Promise<DeviceRow[]> {
  if (clients.length === 0) return [];
  return db
    .insert(devicesTable)
    .values(
      clients.map((c) => ({
        id: randomUUID(),
        accountId,
        hostClientId: c.id,
        name: c.name.slice(0, 100) || "Streaming client",
        pairedAt: at,
      })),
    )
    .onConflictDoNothing()
    .returning();
}

/** Marks the account's device removed; undefined when it has no such device (or it is already removed). */
export async function markDeviceRemoved(
  db: SessionsDb,
  accountId: string,
  id: string,
  at: Date,
): Promise<DeviceRow | undefined> {
  const rows = await db
    .update(devicesTable)
    .set({ removedAt: at })
    .where(
      and(eq(devicesTable.accountId, accountId), eq(devicesTable.id, id), isNull(devicesTable.removedAt)),
    )
    .returning();
  return rows[0];
}

/** Removed devices whose unpairing has not reached a host yet. */
export async function pendingUnpairs(db: SessionsDb, accountId: string): Promise<DeviceRow[]> {
  return db
    .select()
    .from(devicesTable)
    .where(
      and(
        eq(devicesTable.accountId, accountId),
        isNotNull(devicesTable.removedAt),
        isNull(devicesTable.unpairedAt),
      ),
    );
}

export async function markUnpaired(db: SessionsDb, ids: readonly string[], at: Date): Promise<void> {
  if (ids.length === 0) return;
  await db
    .update(devicesTable)
    .set({ unpairedAt: at })
    .where(inArray(devicesTable.id, [...ids]));
}

/**
 * A stream on these sessions' hosts at `at`: every device paired on each session's account counts as used then
 * (Sunshine does not say which of them streamed).
 */
export async function touchDevicesOfSessions(
  db: SessionsDb,
  sessionIds: readonly string[],
  at: Date,
): Promise<void> {
  if (sessionIds.length === 0) return;
  await db.execute(sql`
    update ${devicesTable} d set last_used_at = greatest(d.last_used_at, ${at.toISOString()}::timestamptz)
      from ${sessionsTable} s
     where s.id = any(${sql.param([...sessionIds])}::uuid[])
       and d.account_id = s.account_id
       and d.removed_at is null`);
}
