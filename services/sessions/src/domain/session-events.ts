import { createEvent, publishInTransaction } from "@cgs/shared";
import type { SessionsTx } from "../data/session-repository";
import type { SessionRow } from "../data/session-tables";

/**
 * Outbox writes for the events billing meters from; always inside the state change's transaction.
 * Billing meters from `runningAt` (the instance reached running), never from the launch request.
 */
export async function publishSessionStarted(tx: SessionsTx, row: SessionRow, prefix: string): Promise<void> {
  if (!row.runningAt || !row.instanceId) throw new Error("session.started needs runningAt and instanceId");
  await publishInTransaction(
    tx,
    createEvent("session.started", row.accountId, {
      sessionId: row.id,
      instanceId: row.instanceId,
      ratePerMinute: row.ratePerMinute,
      currency: row.currency,
      startedAt: row.runningAt.toISOString(),
    }),
    prefix,
  );
}

/** Also for a session stopped before it ran (startedAt null): billing then gives its hold back at once. */
export async function publishSessionStopped(tx: SessionsTx, row: SessionRow, prefix: string): Promise<void> {
  const stoppedAt = row.stoppedAt ?? row.endedAt;
  if (!stoppedAt) throw new Error("session.stopped needs stoppedAt");
  await publishInTransaction(
    tx,
    createEvent("session.stopped", row.accountId, {
      sessionId: row.id,
      startedAt: row.runningAt ? row.runningAt.toISOString() : null,
      stoppedAt: stoppedAt.toISOString(),
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
      startedAt: row.runningAt ? row.runningAt.toISOString() : null,
      ratePerMinute: row.ratePerMinute,
      currency: row.currency,
    }),
    prefix,
  );
}
