import { randomUUID } from "node:crypto";
import { eq, sql } from "drizzle-orm";
import { createEvent, sendEventMessage, type EventEnvelope } from "@cgs/shared";
import { drainQueue, waitUntil } from "@cgs/shared/testing/queue";
import { ledgerEntriesTable, meteredSessionsTable } from "./data/billing-tables";
import { findLedgerMismatches } from "./data/wallet-repository";
import { openBillingProcessFixture, type BillingProcessFixture } from "./testing/billing-process";
import { creditWallet } from "./testing/wallet-fixtures";

const MINUTE_MS = 400;
const RATE = 10;

describe("a session.stopped parked in billing's DLQ (real PostgreSQL, moto SQS, the billing process)", () => {
  let f: BillingProcessFixture;

  beforeAll(async () => {
    f = await openBillingProcessFixture({
      name: "dlq",
      minuteMs: MINUTE_MS,
      env: { METERING_AUDIT_INTERVAL_MS: "1000" },
    });
  });
  afterAll(() => f.close());

  it("when the stop event never reaches billing, then the audit asks sessions, and its fresh answer ends the charge at the real stop time", async () => {
    const accountId = `acct-dlq-${randomUUID()}`;
    await creditWallet(f.deps, accountId, 10_000);
    const sessionId = randomUUID();
    const base = { sessionId, ratePerMinute: RATE, currency: "USD" };
    const startedAt = new Date();
    const stoppedAt = new Date(startedAt.getTime() + 2.5 * MINUTE_MS);
    const stop = (id?: string) =>
      createEvent(
        "session.stopped",
        accountId,
        { ...base, startedAt: startedAt.toISOString(), stoppedAt: stoppedAt.toISOString(), reason: "user" },
        id ? { id } : {},
      );
    try {
      f.billing.start();
      await sendEventMessage(
        f.sqs,
        await f.resolve(f.billingQueue),
        createEvent("session.started", accountId, {
          ...base,
          instanceId: "i-dlq",
          startedAt: startedAt.toISOString(),
        }),
      );
      // The stop lands in the DLQ instead of the queue billing reads.
      await sendEventMessage(f.sqs, await f.resolve(`${f.billingQueue}-dlq`), stop());
      const audit = await waitUntil(
        async () =>
          (await drainQueue(f.sqs, await f.resolve(f.sessionsQueue), { waitTimeSeconds: 1 }))
            .map((m) => JSON.parse(m.Body ?? "{}") as EventEnvelope)
            .find(
              (e) =>
                e.type === "metering.audit" &&
                e.accountId === accountId &&
                (e.data as { sessionIds: string[] }).sessionIds.includes(sessionId),
            ),
        { timeoutMs: 20_000, intervalMs: 200, description: "metering.audit on the sessions queue" },
      );
      expect(audit).toBeDefined();
      const row = async () =>
        (
          await f.deps.db
            .select()
            .from(meteredSessionsTable)
            .where(eq(meteredSessionsTable.sessionId, sessionId))
        )[0]!;
      // Meanwhile metering went on charging past the real end.
      expect((await row()).chargedMinutes).toBeGreaterThan(3);
      // Sessions' answer (services/sessions' metering-audit, tested there): a fresh session.stopped, real stop time.
      await sendEventMessage(f.sqs, await f.resolve(f.billingQueue), stop(randomUUID()));
      await waitUntil(async () => (await row()).status === "stopped", {
        timeoutMs: 20_000,
        description: "the charge ended",
      });
      expect((await row()).stoppedAt).toEqual(stoppedAt);
      const total = (
        await f.deps.db
          .select({ total: sql<number>`coalesce(sum(${ledgerEntriesTable.amount}), 0)::int` })
          .from(ledgerEntriesTable)
          .where(sql`${ledgerEntriesTable.details}->>'sessionId' = ${sessionId}`)
      )[0]!.total;
      expect(total).toBe(-3 * RATE);
      expect(await findLedgerMismatches(f.deps.db)).toEqual([]);
    } catch (err) {
      process.stderr.write(`billing output:\n${f.billing.output()}\n`);
      throw err;
    }
  }, 90_000);
});
