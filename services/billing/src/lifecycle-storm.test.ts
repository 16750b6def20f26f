import { randomUUID } from "node:crypto";
import { and, eq, inArray, sql } from "drizzle-orm";
import { createEvent, processedEventsTable, sendEventMessage, type AnyEvent } from "@cgs/shared";
import { waitUntil } from "@cgs/shared/testing/queue";
import { holdsTable, ledgerEntriesTable, meteredSessionsTable, walletsTable } from "./data/billing-tables";
import { findLedgerMismatches } from "./data/wallet-repository";
import { authorizeStart } from "./domain/start-authorization";
import { openBillingProcessFixture, type BillingProcessFixture } from "./testing/billing-process";
import { creditWallet } from "./testing/wallet-fixtures";

const MINUTE_MS = 400;
const RATE = 10;
const SESSIONS = 200;
const ACCOUNTS = 20;

interface Planned {
  accountId: string;
  sessionId: string;
  /** When the instance was running; null for a session that never ran. */
  runningAt: Date | null;
  endedAt: Date;
  events: AnyEvent[];
  /** What the README's rounding rule says the session costs: every started minute. */
  expectedCharge: number;
}

function shuffle<T>(items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}

/** Every shape a session's lifecycle takes on the wire: ran and stopped, ran and failed, never ran. */
function plan(accountId: string, i: number, t0: number): Planned {
  const sessionId = randomUUID();
  const base = { sessionId, ratePerMinute: RATE, currency: "USD" };
  const ran = i % 4 !== 3;
  const runningAt = ran ? new Date(t0 + (i % 7) * 37) : null;
  // Durations with and without a partial last minute (k minutes exactly, or k minutes and a bit).
  const duration = (1 + (i % 6)) * MINUTE_MS + (i % 2 === 0 ? 0 : 0.3 * MINUTE_MS);
  const endedAt = new Date(t0 + 20 + duration);
  const events: AnyEvent[] = [];
  if (runningAt) {
    events.push(
      createEvent("session.started", accountId, {
        ...base,
        instanceId: `i-${i}`,
        startedAt: runningAt.toISOString(),
      }),
    );
  }
  const start = runningAt ? runningAt.toISOString() : null;
  if (i % 3 === 0) {
    events.push(
      createEvent("session.failed", accountId, {
        ...base,
        reason: "instance_lost",
        message: "The instance stopped unexpectedly",
        failedAt: endedAt.toISOString(),
        startedAt: start,
      }),
    );
  } else {
    events.push(
      createEvent("session.stopped", accountId, {
        ...base,
        startedAt: start,
        stoppedAt: endedAt.toISOString(),
        reason: "user",
      }),
    );
  }
  const expectedCharge = runningAt
    ? Math.ceil((endedAt.getTime() - runningAt.getTime()) / MINUTE_MS) * RATE
    : 0;
  return { accountId, sessionId, runningAt, endedAt, events, expectedCharge };
}

describe("a storm of lifecycle events for 200 sessions, with the billing process killed mid-way (real PostgreSQL, moto SQS)", () => {
  let f: BillingProcessFixture;

  beforeAll(async () => {
    f = await openBillingProcessFixture({
      name: "storm",
      minuteMs: MINUTE_MS,
      visibilityTimeout: 2,
      maxReceiveCount: 10,
    });
  });
  afterAll(() => f.close());

  it("when started, running, stopped and failed events arrive shuffled and duplicated, then each session costs its real running minutes, no hold is left and nothing keeps metering", async () => {
    const accounts = Array.from({ length: ACCOUNTS }, () => `acct-storm-${randomUUID()}`);
    for (const a of accounts) await creditWallet(f.deps, a, 50_000);
    const t0 = Date.now();
    const sessions = Array.from({ length: SESSIONS }, (_, i) => plan(accounts[i % ACCOUNTS]!, i, t0));
    // Every start was authorized first, as sessions does before it launches.
    for (const s of sessions) {
      await authorizeStart(f.deps, s.accountId, {
        sessionId: s.sessionId,
        ratePerMinute: RATE,
        currency: "USD",
      });
    }
    const distinct = sessions.flatMap((s) => s.events);
    const deliveries = shuffle(distinct.flatMap((e, i) => Array.from({ length: 1 + (i % 3) }, () => e)));
    const url = await f.resolve(f.billingQueue);
    const processed = async () =>
      (
        await f.deps.db
          .select({ n: sql<number>`count(*)::int` })
          .from(processedEventsTable)
          .where(
            inArray(
              processedEventsTable.eventId,
              distinct.map((e) => e.id),
            ),
          )
      )[0]!.n;

    try {
      f.billing.start();
      let sent = 0;
      const half = Math.floor(deliveries.length / 2);
      for (; sent < half; sent++) await sendEventMessage(f.sqs, url, deliveries[sent]!);
      await waitUntil(async () => (await processed()) >= distinct.length / 4, {
        timeoutMs: 60_000,
        description: "a quarter of the events handled by the first process",
      });
      await f.billing.kill();
      for (; sent < deliveries.length; sent++) await sendEventMessage(f.sqs, url, deliveries[sent]!);
      f.billing.start();
      await waitUntil(async () => (await processed()) === distinct.length, {
        timeoutMs: 120_000,
        intervalMs: 500,
        description: "every event handled after the restart",
      });
      // Let the metering loop run past every end: a phantom session would keep charging here.
      await new Promise((r) => setTimeout(r, 3 * MINUTE_MS));

      const db = f.deps.db;
      const charges = await db
        .select({
          sessionId: sql<string>`${ledgerEntriesTable.details}->>'sessionId'`,
          total: sql<number>`sum(${ledgerEntriesTable.amount})::int`,
        })
        .from(ledgerEntriesTable)
        .where(inArray(ledgerEntriesTable.kind, ["usage", "usage_refund"]))
        .groupBy(sql`${ledgerEntriesTable.details}->>'sessionId'`);
      const charged = new Map(charges.map((c) => [c.sessionId, -c.total]));
      const wrong = sessions
        .filter((s) => (charged.get(s.sessionId) ?? 0) !== s.expectedCharge)
        .map((s) => ({
          sessionId: s.sessionId,
          expected: s.expectedCharge,
          charged: charged.get(s.sessionId),
        }));
      expect(wrong).toEqual([]);
      expect(sessions.filter((s) => !s.runningAt).length).toBe(SESSIONS / 4);

      const metered = await db
        .select()
        .from(meteredSessionsTable)
        .where(
          inArray(
            meteredSessionsTable.sessionId,
            sessions.map((s) => s.sessionId),
          ),
        );
      expect(metered).toHaveLength(SESSIONS);
      expect(metered.filter((m) => m.status !== "stopped")).toEqual([]);
      expect(await db.select().from(holdsTable).where(eq(holdsTable.status, "active"))).toEqual([]);
      const wallets = await db.select().from(walletsTable).where(inArray(walletsTable.accountId, accounts));
      expect(wallets.map((w) => w.held)).toEqual(accounts.map(() => 0));
      expect(wallets.filter((w) => w.balance < 0 || w.shortfall !== 0)).toEqual([]);
      expect(await findLedgerMismatches(db)).toEqual([]);
      const byAccount = new Map<string, number>();
      for (const s of sessions)
        byAccount.set(s.accountId, (byAccount.get(s.accountId) ?? 0) + s.expectedCharge);
      for (const w of wallets) expect(w.balance).toBe(50_000 - byAccount.get(w.accountId)!);
    } catch (err) {
      const running = await f.deps.db
        .select()
        .from(meteredSessionsTable)
        .where(and(eq(meteredSessionsTable.status, "running")));
      process.stderr.write(
        `billing output:\n${f.billing.output()}\nstill running: ${JSON.stringify(running)}\n`,
      );
      throw err;
    }
  }, 240_000);
});
