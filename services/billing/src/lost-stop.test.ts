import { randomBytes, randomUUID } from "node:crypto";
import { DeleteQueueCommand } from "@aws-sdk/client-sqs";
import { eq, sql } from "drizzle-orm";
import pino from "pino";
import {
  createEvent,
  createQueueUrlResolver,
  ensureQueue,
  sendEventMessage,
  serviceQueueNames,
  type EventEnvelope,
} from "@cgs/shared";
import { createTestSqsClient, drainQueue, waitUntil } from "@cgs/shared/testing/queue";
import { ledgerEntriesTable, meteredSessionsTable } from "./data/billing-tables";
import { findLedgerMismatches } from "./data/wallet-repository";
import { billingSettings, type BillingDeps } from "./domain/billing-deps";
import {
  billingTestConfig,
  openBillingTestDatabase,
  type BillingDatabaseFixture,
} from "./testing/billing-harness";
import { billingProcess, type BillingProcess } from "./testing/billing-process";
import { creditWallet } from "./testing/wallet-fixtures";

const MINUTE_MS = 400;
const RATE = 10;

describe("a session.stopped parked in billing's DLQ (real PostgreSQL, moto SQS, the billing process)", () => {
  const sqs = createTestSqsClient();
  const resolve = createQueueUrlResolver(sqs);
  const prefix = `bd${randomBytes(4).toString("hex")}-`;
  const billingQueue = `${prefix}${serviceQueueNames.billing}`;
  const sessionsQueue = `${prefix}${serviceQueueNames.sessions}`;
  let fixture: BillingDatabaseFixture;
  let deps: BillingDeps;
  let billing: BillingProcess;

  beforeAll(async () => {
    fixture = await openBillingTestDatabase("billing_dlq");
    deps = {
      db: fixture.database.db,
      settings: billingSettings(billingTestConfig({ STORAGE_DEFAULT_TIER: "none" })),
      logger: pino({ level: "silent" }),
      now: () => new Date(),
    };
    billing = billingProcess({
      databaseUrl: fixture.created.url,
      queuePrefix: prefix,
      minuteMs: MINUTE_MS,
      env: { METERING_AUDIT_INTERVAL_MS: "1000" },
    });
    for (const name of [billingQueue, sessionsQueue])
      await ensureQueue(sqs, name, { maxReceiveCount: 5, visibilityTimeout: 30 });
  });
  afterAll(async () => {
    await billing.kill();
    for (const name of [billingQueue, `${billingQueue}-dlq`, sessionsQueue, `${sessionsQueue}-dlq`]) {
      const url = await resolve(name).catch(() => undefined);
      if (url) await sqs.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined);
    }
    sqs.destroy();
    await fixture.close();
  });

  it("when the stop event never reaches billing, then the audit asks sessions, and its fresh answer ends the charge at the real stop time", async () => {
    const accountId = `acct-dlq-${randomUUID()}`;
    await creditWallet(deps, accountId, 10_000);
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
      billing.start();
      await sendEventMessage(
        sqs,
        await resolve(billingQueue),
        createEvent("session.started", accountId, {
          ...base,
          instanceId: "i-dlq",
          startedAt: startedAt.toISOString(),
        }),
      );
      // The stop lands in the DLQ instead of the queue billing reads.
      await sendEventMessage(sqs, await resolve(`${billingQueue}-dlq`), stop());
      const audit = await waitUntil(
        async () =>
          (await drainQueue(sqs, await resolve(sessionsQueue), { waitTimeSeconds: 1 }))
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
          await fixture.database.db
            .select()
            .from(meteredSessionsTable)
            .where(eq(meteredSessionsTable.sessionId, sessionId))
        )[0]!;
      // Meanwhile metering went on charging past the real end.
      expect((await row()).chargedMinutes).toBeGreaterThan(3);
      // Sessions' answer (services/sessions' metering-audit, tested there): a fresh session.stopped, real stop time.
      await sendEventMessage(sqs, await resolve(billingQueue), stop(randomUUID()));
      await waitUntil(async () => (await row()).status === "stopped", {
        timeoutMs: 20_000,
        description: "the charge ended",
      });
      expect((await row()).stoppedAt).toEqual(stoppedAt);
      const total = (
        await fixture.database.db
          .select({ total: sql<number>`coalesce(sum(${ledgerEntriesTable.amount}), 0)::int` })
          .from(ledgerEntriesTable)
          .where(sql`${ledgerEntriesTable.details}->>'sessionId' = ${sessionId}`)
      )[0]!.total;
      expect(total).toBe(-3 * RATE);
      expect(await findLedgerMismatches(fixture.database.db)).toEqual([]);
    } catch (err) {
      process.stderr.write(`billing output:\n${billing.output()}\n`);
      throw err;
    }
  }, 90_000);
});
