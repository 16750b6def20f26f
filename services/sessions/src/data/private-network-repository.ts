import { randomUUID } from "node:crypto";
import { and, asc, eq, gt, inArray, isNull, notExists, notLike, sql } from "drizzle-orm";
import type { SessionsDb, SessionsTx } from "./session-repository";
import { activeStates, sessionsTable } from "./session-tables";
import {
  privateNetworkKeysTable,
  privateNetworkSlotsTable,
  type PrivateNetworkKeyKind,
} from "./private-network-tables";

type Executor = SessionsDb | SessionsTx;

/**
 * Serializes the private-network key work of one account until the transaction ends (a transaction-scoped
 * advisory lock: concurrent requests of one account queue here, other accounts never wait).
 */
export async function lockAccountKeys(tx: SessionsTx, accountId: string): Promise<void> {
  await tx.execute(
    sql`select pg_advisory_xact_lock(hashtextextended(${`cgs-private-network:${accountId}`}, 0))`,
  );
}

export interface RecordedKey {
  keyId: string;
  expiresAt: Date;
}

/** The account's device keys that are unexpired and not yet seen used (places held for keys being minted too). */
export async function unusedDeviceKeys(db: Executor, accountId: string, now: Date): Promise<RecordedKey[]> {
  return db
    .select({ keyId: privateNetworkKeysTable.keyId, expiresAt: privateNetworkKeysTable.expiresAt })
    .from(privateNetworkKeysTable)
    .where(
      and(
        eq(privateNetworkKeysTable.accountId, accountId),
        eq(privateNetworkKeysTable.kind, "device"),
        gt(privateNetworkKeysTable.expiresAt, now),
        isNull(privateNetworkKeysTable.usedAt),
      ),
    )
    .orderBy(asc(privateNetworkKeysTable.expiresAt));
}

export async function markKeysUsed(db: Executor, keyIds: readonly string[], at: Date): Promise<void> {
  if (keyIds.length === 0) return;
  await db
    .update(privateNetworkKeysTable)
    .set({ usedAt: at })
    .where(and(inArray(privateNetworkKeysTable.keyId, [...keyIds]), isNull(privateNetworkKeysTable.usedAt)));
}

/** A place held for a key being minted: it counts against the limit until finishKey or dropKey. */
export async function reserveKey(
  db: Executor,
  key: { accountId: string; kind: PrivateNetworkKeyKind; expiresAt: Date },
): Promise<string> {
  const keyId = `pending:${randomUUID()}`;
  await db.insert(privateNetworkKeysTable).values({ keyId, ...key });
  return keyId;
}

/** The reserved place becomes the minted key (its control-plane id, expiry and tag). */
export async function finishKey(
  db: Executor,
  reservedId: string,
  key: { keyId: string; expiresAt: Date; networkTag?: string },
): Promise<void> {
  await db
    .update(privateNetworkKeysTable)
    .set({ keyId: key.keyId, expiresAt: key.expiresAt, networkTag: key.networkTag ?? null })
    .where(eq(privateNetworkKeysTable.keyId, reservedId));
}

export async function dropKey(db: Executor, keyId: string): Promise<void> {
  await db.delete(privateNetworkKeysTable).where(eq(privateNetworkKeysTable.keyId, keyId));
}

export interface AccountKey {
  id: string;
  tag: string | null;
}

/** Every minted key recorded for the account (what an account purge revokes). */
export async function accountKeys(db: Executor, accountId: string): Promise<AccountKey[]> {
  const rows = await db
    .select({ id: privateNetworkKeysTable.keyId, tag: privateNetworkKeysTable.networkTag })
    .from(privateNetworkKeysTable)
    .where(
      and(
        eq(privateNetworkKeysTable.accountId, accountId),
        notLike(privateNetworkKeysTable.keyId, "pending:%"),
      ),
    );
  return rows;
}

export async function forgetAccountKeys(db: Executor, accountId: string): Promise<void> {
  await db.delete(privateNetworkKeysTable).where(eq(privateNetworkKeysTable.accountId, accountId));
}

// ---------------------------------------------------------------- slot leases (hosted Tailscale)

/** A slot taken from an account that no longer plays: its nodes and keys must leave the tailnet before reuse. */
export interface ReclaimedSlot {
  slot: number;
  previousAccountId: string;
  previousKeyIds: string[];
}

// Leasing is rare (once per account that starts playing) and must never hand one slot to two accounts.
const SLOT_LEASE_LOCK = sql`hashtextextended('cgs-private-network-slots', 0)`;

/**
 * The account's slot tag number, leasing one when it holds none: the lowest never-leased slot below `size`, else
 * the longest-held slot of an account with no active session (after `clear` has emptied it). Undefined when every
 * slot belongs to an account that is playing.
 */
export async function leaseSlot(
  db: SessionsDb,
  accountId: string,
  size: number,
  clear: (reclaimed: ReclaimedSlot) => Promise<void>,
): Promise<number | undefined> {
  const held = await findSlot(db, accountId);
  if (held !== undefined) return held;
  return db.transaction(async (tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(${SLOT_LEASE_LOCK})`);
    const again = await findSlot(tx, accountId);
    if (again !== undefined) return again;
    const taken = await tx.select({ slot: privateNetworkSlotsTable.slot }).from(privateNetworkSlotsTable);
    const used = new Set(taken.map((r) => r.slot));
    for (let slot = 0; slot < size; slot += 1) {
      if (!used.has(slot)) {
        await tx.insert(privateNetworkSlotsTable).values({ slot, accountId });
        return slot;
      }
    }
    const [idle] = await tx
      .select({ slot: privateNetworkSlotsTable.slot, accountId: privateNetworkSlotsTable.accountId })
      .from(privateNetworkSlotsTable)
      .where(
        and(
          sql`${privateNetworkSlotsTable.slot} < ${size}`,
          notExists(
            tx
              .select({ one: sql`1` })
              .from(sessionsTable)
              .where(
                and(
                  eq(sessionsTable.accountId, privateNetworkSlotsTable.accountId),
                  inArray(sessionsTable.state, [...activeStates]),
                ),
              ),
          ),
        ),
      )
      .orderBy(asc(privateNetworkSlotsTable.leasedAt))
      .limit(1);
    if (!idle) return undefined;
    await clear({
      slot: idle.slot,
      previousAccountId: idle.accountId,
      previousKeyIds: (await accountKeys(tx, idle.accountId)).map((k) => k.id),
    });
    await forgetAccountKeys(tx, idle.accountId);
    await tx
      .update(privateNetworkSlotsTable)
      .set({ accountId, leasedAt: new Date() })
      .where(eq(privateNetworkSlotsTable.slot, idle.slot));
    return idle.slot;
  });
}

export async function findSlot(db: Executor, accountId: string): Promise<number | undefined> {
  const [row] = await db
    .select({ slot: privateNetworkSlotsTable.slot })
    .from(privateNetworkSlotsTable)
    .where(eq(privateNetworkSlotsTable.accountId, accountId));
  return row?.slot;
}
