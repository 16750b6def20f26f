import { createEvent, publishInTransaction } from "@cgs/shared";
import type { SessionsTx } from "../data/session-repository";
import type { SessionRow } from "../data/session-tables";

/** Outbox writes for the events billing meters from; always inside the state change's transaction. */
export async function publishSessionStarted(tx: SessionsTx, row: SessionRow, prefix: string): Promise<void> {
  if (!row.startedAt || !row.instanceId) throw new Error("session.started needs startedAt and instanceId");
  await publishInTransaction(
    tx,
    createEvent("session.started", row.accountId, {
      sessionId: row.id,
      instanceId: row.instanceId,
      ratePerMinute: row.ratePerMinute,
      currency: row.currency,
      startedAt: row.startedAt.toISOString(),
    }),
    prefix,
  );
}

export async function publishSessionStopped(tx: SessionsTx, row: SessionRow, prefix: string): Promise<void> {
  if (!row.startedAt || !row.stoppedAt) throw new Error("session.stopped needs startedAt and stoppedAt");
  await publishInTransaction(
    tx,
    createEvent("session.stopped", row.accountId, {
      sessionId: row.id,
      startedAt: row.startedAt.toISOString(),
      stoppedAt: row.stoppedAt.toISOString(),
      ratePerMinute: row.ratePerMinute,
      currency: row.currency,
      reason: row.stopReason ?? "user",
    }),
    prefix,
  );
}

export async function publishSessionFailed(
  tx: SessionsTx,
  row: SessionRow,
  reason: string,
  prefix: string,
): Promise<void> {
  await publishInTransaction(
    tx,
    createEvent("session.failed", row.accountId, {
      sessionId: row.id,
      reason,
      message: row.message ?? "",
      failedAt: (row.endedAt ?? new Date()).toISOString(),
      startedAt: row.startedAt ? row.startedAt.toISOString() : null,
      ratePerMinute: row.ratePerMinute,
      currency: row.currency,
    }),
    prefix,
  );
}
