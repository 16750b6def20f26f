import { randomUUID } from "node:crypto";
import { eq, like } from "drizzle-orm";
import { createEvent, outboxTable, sendEventMessage, type EventEnvelope } from "@cgs/shared";
import { drainQueue, waitUntil } from "@cgs/shared/testing/queue";
import { ledgerEntriesTable, meteredSessionsTable } from "./data/billing-tables";
import { findLedgerMismatches } from "./data/wallet-repository";
import { openBillingProcessFixture, type BillingProcessFixture } from "./testing/billing-process";
import { creditWallet } from "./testing/wallet-fixtures";

// Spawns the compiled service (dist/main.js), as `npm test` builds every workspace before jest runs.
const MINUTE_MS = 400;
const RATE = 10;

describe("the billing process, killed and restarted while it meters (real PostgreSQL, moto SQS)", () => {
  let f: BillingProcessFixture;

  beforeAll(async () => {
    f = await openBillingProcessFixture({ name: "restart", minuteMs: MINUTE_MS });
  });
  afterAll(() => f.close());

  const publish = async (event: EventEnvelope) => {
    const url = await f.resolve(f.billingQueue);
    await sendEventMessage(f.sqs, url, event);
  };
  const sessionRow = async (sessionId: string) =>
    (
      await f.deps.db.select().from(meteredSessionsTable).where(eq(meteredSessionsTable.sessionId, sessionId))
    )[0];
  const usageMinutes = async (sessionId: string) =>
    (
      await f.deps.db
        .select({ reference: ledgerEntriesTable.reference })
        .from(ledgerEntriesTable)
        .where(like(ledgerEntriesTable.reference, `usage:${sessionId}:%`))
    )
      .map((e) => Number(e.reference.split(":").pop()))
      .sort((a, b) => a - b);

  it("when the process is SIGKILLed mid-session and restarted, then every started minute is charged exactly once, and credits.exhausted reaches the sessions queue", async () => {
    const accountId = `acct-${randomUUID()}`;
    const poorAccountId = `acct-poor-${randomUUID()}`;
    await creditWallet(f.deps, accountId, 10_000);
    await creditWallet(f.deps, poorAccountId, 25);
    const sessionId = `s-${randomUUID()}`;
    const poorSessionId = `s-poor-${randomUUID()}`;

    try {
      f.billing.start();
      const startedAt = new Date();
      const startEvent = (account: string, session: string) =>
        createEvent("session.started", account, {
          sessionId: session,
          instanceId: "i-test",
          ratePerMinute: RATE,
          currency: "USD",
          startedAt: startedAt.toISOString(),
        });
      await publish(startEvent(accountId, sessionId));
      await publish(startEvent(poorAccountId, poorSessionId));
      await waitUntil(async () => ((await sessionRow(sessionId))?.chargedMinutes ?? 0) >= 3, {
        timeoutMs: 20_000,
        description: "three minutes charged by the first process",
      });
      await f.billing.kill();
      const chargedBeforeKill = (await sessionRow(sessionId))!.chargedMinutes;
      // Minutes keep starting while no billing process runs.
      await new Promise((r) => setTimeout(r, 3 * MINUTE_MS));

      f.billing.start();
      // The same start event again (SQS at-least-once): the restarted process must not charge twice.
      await publish(startEvent(accountId, sessionId));
      await waitUntil(
        async () => ((await sessionRow(sessionId))?.chargedMinutes ?? 0) >= chargedBeforeKill + 3,
        { timeoutMs: 20_000, description: "the restarted process catching up" },
      );
      const stoppedAt = new Date();
      await publish(
        createEvent("session.stopped", accountId, {
          sessionId,
          startedAt: startedAt.toISOString(),
          stoppedAt: stoppedAt.toISOString(),
          ratePerMinute: RATE,
          currency: "USD",
          reason: "user",
        }),
      );
      await waitUntil(async () => (await sessionRow(sessionId))?.status === "stopped", {
        timeoutMs: 20_000,
        description: "session.stopped handled",
      });

      const expectedMinutes = Math.ceil((stoppedAt.getTime() - startedAt.getTime()) / MINUTE_MS);
      const minutes = await usageMinutes(sessionId);
      const refunds = await f.deps.db
        .select({ reference: ledgerEntriesTable.reference })
        .from(ledgerEntriesTable)
        .where(like(ledgerEntriesTable.reference, `usage-refund:${sessionId}:%`));
      const refunded = new Set(refunds.map((r) => Number(r.reference.split(":").pop())));
      const kept = minutes.filter((m) => !refunded.has(m));
      expect(kept).toEqual(Array.from({ length: expectedMinutes }, (_, i) => i));
      expect(new Set(minutes).size).toBe(minutes.length);
      expect(await findLedgerMismatches(f.deps.db)).toEqual([]);

      const exhausted = await waitUntil(
        async () => {
          const url = await f.resolve(f.sessionsQueue);
          const messages = await drainQueue(f.sqs, url, { waitTimeSeconds: 1 });
          return messages
            .map((m) => JSON.parse(m.Body ?? "{}") as EventEnvelope)
            .find((e) => e.type === "credits.exhausted" && e.accountId === poorAccountId);
        },
        // A row the killed process had claimed is sent again once its 30 s claim lapses, so allow for that.
        { timeoutMs: 45_000, intervalMs: 200, description: "credits.exhausted on the sessions queue" },
      );
      // Whatever minute it happened in, the event reports a balance that no longer covers a minute.
      const data = exhausted.data as { balance: number; currency: string };
      expect(data.currency).toBe("USD");
      expect(data.balance).toBeLessThan(RATE);
    } catch (err) {
      const outbox = await f.deps.db.select().from(outboxTable);
      const sessions = await f.deps.db.select().from(meteredSessionsTable);
      process.stderr.write(
        `billing process output:\n${f.billing.output()}\noutbox: ${JSON.stringify(outbox)}\nsessions: ${JSON.stringify(sessions)}\n`,
      );
      throw err;
    }
  }, 120_000);
});
