import { createEvent } from "@cgs/shared";
import type { SessionsTx } from "../data/session-repository";
import type { SessionRow } from "../data/session-tables";
import type { SessionsDomainDeps } from "./session-deps";

type Publishing = Pick<SessionsDomainDeps, "events" | "clock">;

/**
 * Outbox writes for the events billing meters from; always inside the state change's transaction.
 * Billing meters from `runningAt` (the instance reached running), never from the launch request.
 */
export async function publishSessionStarted(
  { events }: Publishing,
  tx: SessionsTx,
  row: SessionRow,
): Promise<void> {
  if (!row.runningAt || !row.instanceId) throw new Error("session.started needs runningAt and instanceId");
  await events.publish(
    tx,
    createEvent("session.started", row.accountId, {
      sessionId: row.id,
      instanceId: row.instanceId,
      ratePerMinute: row.ratePerMinute,
      currency: row.currency,
      startedAt: row.runningAt.toISOString(),
    }),
  );
}

/** Also for a session stopped before it ran (startedAt null): billing then gives its hold back at once. */
export async function publishSessionStopped(
  { events }: Publishing,
  tx: SessionsTx,
  row: SessionRow,
): Promise<void> {
  const stoppedAt = row.stoppedAt ?? row.endedAt;
  if (!stoppedAt) throw new Error("session.stopped needs stoppedAt");
  await events.publish(
    tx,
    createEvent("session.stopped", row.accountId, {
      sessionId: row.id,
      startedAt: row.runningAt ? row.runningAt.toISOString() : null,
      stoppedAt: stoppedAt.toISOString(),
      ratePerMinute: row.ratePerMinute,
      currency: row.currency,
      reason: row.stopReason ?? "user",
    }),
  );
}

export async function publishSessionFailed(
  { events, clock }: Publishing,
  tx: SessionsTx,
  row: SessionRow,
  reason: string,
): Promise<void> {
  await events.publish(
    tx,
    createEvent("session.failed", row.accountId, {
      sessionId: row.id,
      reason,
      message: row.message ?? "",
      failedAt: (row.endedAt ?? clock.now()).toISOString(),
      startedAt: row.runningAt ? row.runningAt.toISOString() : null,
      ratePerMinute: row.ratePerMinute,
      currency: row.currency,
    }),
  );
}
