import { randomUUID } from "node:crypto";
import { and, eq, like, sql } from "drizzle-orm";
import pino from "pino";
import { createEvent, openDatabase, outboxTable, type AnyEvent, createOutboxPublisher } from "@cgs/shared";
import {
  holdsTable,
  ledgerEntriesTable,
  meteredSessionsTable,
  storagePeriodsTable,
  walletsTable,
} from "../data/billing-tables";
import { findLedgerMismatches } from "../data/wallet-repository";
import * as schema from "../data/schema";
import {
  billingMigrationsFolder,
  billingTestConfig,
  openBillingTestDatabase,
  testClock,
  type BillingDatabaseFixture,
  type TestClock,
} from "../testing/billing-harness";
import { creditWallet } from "../testing/wallet-fixtures";
import { billingEventHandlers } from "../events/billing-event-handlers";
import { billingSettings, type BillingDeps } from "./billing-deps";
import { meterRunningSessions, reforecastAccount, releaseExpiredHolds } from "./metering";
import { authorizeStart } from "./start-authorization";
import { chargeStoragePeriods, getStorageBilling } from "./storage-billing";
import { readWallet } from "./wallets";

const MINUTE = 60_000;
const RATE = 10;

describe("metering, holds, storage and purge (real PostgreSQL, controlled clock)", () => {
  let fixture: BillingDatabaseFixture;
  let clock: TestClock;
  let deps: BillingDeps;
  let handlers: ReturnType<typeof billingEventHandlers>;

  beforeAll(async () => {
    fixture = await openBillingTestDatabase("billing_metering", 12);
    clock = testClock("2026-11-20T10:00:00.000Z");
    deps = {
      db: fixture.database.db,
      settings: billingSettings(billingTestConfig({})),
      publisher: createOutboxPublisher("test-metering-"),
      logger: pino({ level: "silent" }),
      clock,
    };
    handlers = billingEventHandlers(deps);
  });
  afterAll(() => fixture.close());

  /** Runs a consumed event's handler the way the SQS consumer does: in one transaction. */
  const consume = (event: AnyEvent) =>
    fixture.database.withTransaction(async (tx) => {
      const handler = handlers[event.type] as (e: AnyEvent, t: typeof tx) => Promise<void>;
      await handler(event, tx);
    });
  const started = (accountId: string, sessionId: string, startedAt: Date, rate = RATE) =>
    createEvent("session.started", accountId, {
      sessionId,
      instanceId: "i-1",
      ratePerMinute: rate,
      currency: "USD",
      startedAt: startedAt.toISOString(),
    });
  const stopped = (accountId: string, sessionId: string, startedAt: Date, stoppedAt: Date, rate = RATE) =>
    createEvent("session.stopped", accountId, {
      sessionId,
      startedAt: startedAt.toISOString(),
      stoppedAt: stoppedAt.toISOString(),
      ratePerMinute: rate,
      currency: "USD",
      reason: "user",
    });
  const wallet = async (accountId: string) =>
    (await fixture.database.db.select().from(walletsTable).where(eq(walletsTable.accountId, accountId)))[0]!;
  const usageMinutes = async (sessionId: string) =>
    (
      await fixture.database.db
        .select()
        .from(ledgerEntriesTable)
        .where(like(ledgerEntriesTable.reference, `usage:${sessionId}:%`))
    )
      .map((e) => Number(e.reference.split(":").pop()))
      .sort((a, b) => a - b);
  const newAccount = async (credit: number) => {
    const accountId = `acct-${randomUUID()}`;
    await creditWallet(deps, accountId, credit + 200); // + the basic tier's storage for the period
    return accountId;
  };

  it("when a session starts, runs 3.2 minutes and stops, then 4 started minutes are charged from its hold and the rest of the hold is released", async () => {
    const accountId = await newAccount(1_000);
    const sessionId = `s-${randomUUID()}`;
    await authorizeStart(deps, accountId, { sessionId, ratePerMinute: RATE, currency: "USD" });
    expect(await wallet(accountId)).toMatchObject({ balance: 1_000, held: 150 });
    const t0 = clock.now();
    await consume(started(accountId, sessionId, t0));
    expect(await usageMinutes(sessionId)).toEqual([0]);
    expect(await wallet(accountId)).toMatchObject({ balance: 990, held: 140 });

    clock.advance(2.5 * MINUTE);
    await meterRunningSessions(deps);
    expect(await usageMinutes(sessionId)).toEqual([0, 1, 2]);
    clock.advance(0.7 * MINUTE);
    await consume(stopped(accountId, sessionId, t0, clock.now()));
    expect(await usageMinutes(sessionId)).toEqual([0, 1, 2, 3]);
    expect(await wallet(accountId)).toMatchObject({ balance: 960, held: 0 });
    const hold = (
      await fixture.database.db.select().from(holdsTable).where(eq(holdsTable.sessionId, sessionId))
    )[0]!;
    expect(hold).toMatchObject({ status: "released", remaining: 0 });
  });

  it("when session events are redelivered or the stop is handled twice, then nothing is charged twice", async () => {
    const accountId = await newAccount(1_000);
    const sessionId = `s-${randomUUID()}`;
    const t0 = clock.now();
    const start = started(accountId, sessionId, t0);
    await consume(start);
    await consume(start);
    clock.advance(1.5 * MINUTE);
    const stop = stopped(accountId, sessionId, t0, clock.now());
    await consume(stop);
    await consume(stop);
    await consume(start);
    await meterRunningSessions(deps);
    expect(await usageMinutes(sessionId)).toEqual([0, 1]);
    expect((await wallet(accountId)).balance).toBe(980);
  });

  it("when session.stopped arrives before session.started, then the minutes are charged once and the late start is ignored", async () => {
    const accountId = await newAccount(1_000);
    const sessionId = `s-${randomUUID()}`;
    const t0 = new Date(clock.now().getTime() - 5 * MINUTE);
    await consume(stopped(accountId, sessionId, t0, new Date(t0.getTime() + 2 * MINUTE)));
    await consume(started(accountId, sessionId, t0));
    await meterRunningSessions(deps);
    expect(await usageMinutes(sessionId)).toEqual([0, 1]);
  });

  it("when the stop event arrives after the loop charged a minute that began after the stop, then that minute is refunded", async () => {
    const accountId = await newAccount(1_000);
    const sessionId = `s-${randomUUID()}`;
    const t0 = clock.now();
    await consume(started(accountId, sessionId, t0));
    clock.advance(5.1 * MINUTE);
    await meterRunningSessions(deps);
    expect(await usageMinutes(sessionId)).toEqual([0, 1, 2, 3, 4, 5]);
    await consume(stopped(accountId, sessionId, t0, new Date(t0.getTime() + 4.5 * MINUTE)));
    expect((await wallet(accountId)).balance).toBe(1_000 - 5 * RATE);
    const refunds = await fixture.database.db
      .select()
      .from(ledgerEntriesTable)
      .where(eq(ledgerEntriesTable.reference, `usage-refund:${sessionId}:5`));
    expect(refunds).toHaveLength(1);
    expect(refunds[0]!.amount).toBe(RATE);
  });

  it("when a metering pass is late (a crash or a pause), then it catches up every missed minute without skipping one", async () => {
    const accountId = await newAccount(1_000);
    const sessionId = `s-${randomUUID()}`;
    const t0 = clock.now();
    await consume(started(accountId, sessionId, t0));
    clock.advance(7.2 * MINUTE);
    await meterRunningSessions(deps);
    expect(await usageMinutes(sessionId)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    await consume(stopped(accountId, sessionId, t0, clock.now()));
  });

  it("when two replicas meter 40 sessions at the same moment, then every due minute is charged exactly once", async () => {
    const t0 = clock.now();
    const sessions: { accountId: string; sessionId: string }[] = [];
    for (let i = 0; i < 40; i++) {
      const accountId = await newAccount(1_000);
      const sessionId = `s-${randomUUID()}`;
      await consume(started(accountId, sessionId, t0));
      sessions.push({ accountId, sessionId });
    }
    clock.advance(4.5 * MINUTE);
    const small = { ...deps, settings: { ...deps.settings, meteringBatchSize: 7 } };
    await Promise.all([
      meterRunningSessions(small),
      meterRunningSessions(small),
      meterRunningSessions(small),
    ]);
    for (const { accountId, sessionId } of sessions) {
      expect(await usageMinutes(sessionId)).toEqual([0, 1, 2, 3, 4]);
      expect((await wallet(accountId)).balance).toBe(1_000 - 5 * RATE);
      await consume(stopped(accountId, sessionId, t0, clock.now()));
    }
    expect(await findLedgerMismatches(fixture.database.db)).toEqual([]);
  });

  it("when two replicas tick the same minute at once, then each of 300 sessions is charged each minute once, from its hold first, and the ledger reconciles", async () => {
    // Two replicas: two processes' own connection pools on the same database, batches small enough to interleave.
    const other = await openDatabase({
      url: fixture.created.url,
      schema,
      migrationsFolder: billingMigrationsFolder,
      pool: { max: 4 },
    });
    try {
      const replicaSettings = { ...deps.settings, meteringBatchSize: 64 };
      const replicas = [
        { ...deps, settings: replicaSettings },
        { ...deps, db: other.db, settings: replicaSettings },
      ];
      const t0 = clock.now();
      const tag = randomUUID().slice(0, 8);
      const db = fixture.database.db;
      await db.execute(sql`
        insert into wallets (account_id, currency, balance, held, storage_tier)
        select 'acct-${sql.raw(tag)}-' || g, 'USD', 1000, case when g % 2 = 0 then 150 else 0 end, 'none'
          from generate_series(1, 300) g`);
      await db.execute(sql`
        insert into ledger_entries (account_id, kind, reference, amount, currency, balance_after)
        select 'acct-${sql.raw(tag)}-' || g, 'topup', 'topup:${sql.raw(tag)}-' || g, 1000, 'USD', 1000
          from generate_series(1, 300) g`);
      await db.execute(sql`
        insert into holds (id, account_id, session_id, amount, remaining, rate_per_minute, currency)
        select gen_random_uuid(), 'acct-${sql.raw(tag)}-' || g, 's-${sql.raw(tag)}-' || g, 150, 150, ${RATE}, 'USD'
          from generate_series(2, 300, 2) g`);
      await db.execute(sql`
        insert into metered_sessions (session_id, account_id, rate_per_minute, currency, started_at, next_minute_at)
        select 's-${sql.raw(tag)}-' || g, 'acct-${sql.raw(tag)}-' || g, ${RATE}, 'USD', ${t0.toISOString()}::timestamptz,
               ${t0.toISOString()}::timestamptz
          from generate_series(1, 300) g`);

      for (let minute = 0; minute < 4; minute++) {
        clock.set(new Date(t0.getTime() + minute * MINUTE + 30_000));
        const passes = await Promise.all(replicas.map((replica) => meterRunningSessions(replica)));
        expect(passes[0]!.sessions + passes[1]!.sessions).toBeGreaterThanOrEqual(300);
      }

      const charges = await db.execute(sql`
        select count(*)::int as entries, count(distinct reference)::int as distinct_minutes, sum(amount)::int as total
          from ledger_entries where reference like ${`usage:s-${tag}-%`}`);
      expect(charges.rows[0]).toEqual({ entries: 1200, distinct_minutes: 1200, total: -1200 * RATE });
      const wallets = await db
        .select()
        .from(walletsTable)
        .where(like(walletsTable.accountId, `acct-${tag}-%`));
      expect(wallets).toHaveLength(300);
      for (const w of wallets) {
        const withHold = Number(w.accountId.split("-").pop()) % 2 === 0;
        expect(w).toMatchObject({ balance: 1000 - 4 * RATE, held: withHold ? 150 - 4 * RATE : 0 });
      }
      const holds = await db
        .select()
        .from(holdsTable)
        .where(like(holdsTable.sessionId, `s-${tag}-%`));
      expect(holds.every((h) => h.remaining === 150 - 4 * RATE)).toBe(true);
      expect(await findLedgerMismatches(db)).toEqual([]);
      await db.execute(
        sql`update metered_sessions set status = 'stopped' where session_id like ${`s-${tag}-%`}`,
      );
    } finally {
      await other.close();
    }
  });

  it("when a minute starts that the balance cannot pay in full, then credits.exhausted is published once to the sessions queue, at the time the forecast announced, and the balance stops at zero", async () => {
    const accountId = await newAccount(35);
    const sessionId = `s-${randomUUID()}`;
    const t0 = clock.now();
    await consume(started(accountId, sessionId, t0));
    const mine = async () =>
      (
        await fixture.database.db
          .select()
          .from(outboxTable)
          .where(eq(outboxTable.eventType, "credits.exhausted"))
      )
        .filter((row) => row.payload.accountId === accountId)
        .map((row) => row.payload.data);
    clock.advance(2.5 * MINUTE);
    await meterRunningSessions(deps);
    // Minutes 0-2 are paid and 5 is left: the paid minute runs to its end, and the stop is announced for minute 3.
    expect(await mine()).toEqual([]);
    const forecast = (
      await fixture.database.db.select().from(outboxTable).where(eq(outboxTable.eventType, "credits.low"))
    ).filter((row) => row.payload.accountId === accountId);
    expect(forecast.at(-1)!.payload.data).toMatchObject({
      runsOutAt: new Date(t0.getTime() + 3 * MINUTE).toISOString(),
      reason: "balance",
    });
    clock.set(new Date(t0.getTime() + 3 * MINUTE + 1_000));
    await meterRunningSessions(deps);
    const exhausted = await fixture.database.db
      .select()
      .from(outboxTable)
      .where(and(eq(outboxTable.eventType, "credits.exhausted")));
    const rows = exhausted.filter((row) => row.payload.accountId === accountId);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.destination).toBe("test-metering-cgs-sessions");
    expect(rows[0]!.payload.data).toEqual({ sessionId, balance: 0, currency: "USD", reason: "balance" });
    // Minutes keep being counted until sessions stops the instance; what the wallet lacks is recorded, not owed.
    clock.set(new Date(t0.getTime() + 4.5 * MINUTE));
    await meterRunningSessions(deps);
    expect((await wallet(accountId)).balance).toBe(0);
    await consume(stopped(accountId, sessionId, t0, clock.now()));
    const session = (
      await fixture.database.db
        .select()
        .from(meteredSessionsTable)
        .where(eq(meteredSessionsTable.sessionId, sessionId))
    )[0]!;
    expect(session).toMatchObject({ status: "stopped", chargedMinutes: 5, uncovered: 5 * RATE - 35 });
    const again = await fixture.database.db
      .select()
      .from(outboxTable)
      .where(eq(outboxTable.eventType, "credits.exhausted"));
    expect(again.filter((row) => row.payload.accountId === accountId)).toHaveLength(1);
  });

  it("when the start fails, then session.failed releases the hold and nothing is charged", async () => {
    const accountId = await newAccount(500);
    const sessionId = `s-${randomUUID()}`;
    await authorizeStart(deps, accountId, { sessionId, ratePerMinute: RATE, currency: "USD" });
    await consume(
      createEvent("session.failed", accountId, {
        sessionId,
        reason: "capacity",
        message: "no capacity",
        failedAt: clock.now().toISOString(),
      }),
    );
    expect(await wallet(accountId)).toMatchObject({ balance: 500, held: 0 });
    expect(await usageMinutes(sessionId)).toEqual([]);
  });

  it("when a running session fails, then its minutes up to the failure are charged and metering ends", async () => {
    const accountId = await newAccount(500);
    const sessionId = `s-${randomUUID()}`;
    const t0 = clock.now();
    await consume(started(accountId, sessionId, t0));
    clock.advance(1.5 * MINUTE);
    await consume(
      createEvent("session.failed", accountId, {
        sessionId,
        reason: "instance-lost",
        message: "lost",
        failedAt: clock.now().toISOString(),
      }),
    );
    clock.advance(3 * MINUTE);
    await meterRunningSessions(deps);
    expect(await usageMinutes(sessionId)).toEqual([0, 1]);
  });

  it("when a lost instance is noticed minutes after it was last seen running, then session.failed's end (the last sighting) ends the charge and later minutes are refunded", async () => {
    const accountId = await newAccount(1_000);
    const sessionId = `s-${randomUUID()}`;
    const t0 = clock.now();
    await consume(started(accountId, sessionId, t0));
    clock.advance(4.2 * MINUTE); // the loss is noticed here; the loop has charged minutes 0..4
    await meterRunningSessions(deps);
    expect(await usageMinutes(sessionId)).toEqual([0, 1, 2, 3, 4]);
    const lastSeenRunning = new Date(t0.getTime() + 2.5 * MINUTE);
    await consume(
      createEvent("session.failed", accountId, {
        sessionId,
        reason: "instance_lost",
        message: "The instance stopped unexpectedly",
        failedAt: lastSeenRunning.toISOString(),
        startedAt: t0.toISOString(),
        ratePerMinute: RATE,
        currency: "USD",
      }),
    );
    // Every minute started before the last sighting (0, 1, 2) is charged; 3 and 4 began after it.
    expect((await wallet(accountId)).balance).toBe(1_000 - 3 * RATE);
    const refunds = await fixture.database.db
      .select()
      .from(ledgerEntriesTable)
      .where(like(ledgerEntriesTable.reference, `usage-refund:${sessionId}:%`));
    expect(refunds.map((r) => r.reference).sort()).toEqual([
      `usage-refund:${sessionId}:3`,
      `usage-refund:${sessionId}:4`,
    ]);
  });

  it("when a hold's session never reports back, then the hold is released after its time to live", async () => {
    const accountId = await newAccount(500);
    const sessionId = `s-${randomUUID()}`;
    // Holds are stamped by the database clock; move the test clock past the TTL from real now.
    await authorizeStart(deps, accountId, { sessionId, ratePerMinute: RATE, currency: "USD" });
    const later = { ...deps, clock: { now: () => new Date(Date.now() + deps.settings.holdTtlMs + MINUTE) } };
    expect(await releaseExpiredHolds(deps)).toBe(0);
    expect(await releaseExpiredHolds(later)).toBeGreaterThanOrEqual(1);
    expect((await wallet(accountId)).held).toBe(0);
  });

  describe("storage periods", () => {
    it("when the period charge runs twice in a period, then it is taken once; the next period is charged again", async () => {
      const accountId = await newAccount(1_000);
      await chargeStoragePeriods(deps);
      await chargeStoragePeriods(deps);
      const charges = await fixture.database.db
        .select()
        .from(ledgerEntriesTable)
        .where(and(eq(ledgerEntriesTable.accountId, accountId), eq(ledgerEntriesTable.kind, "storage")));
      expect(charges.map((c) => c.reference)).toEqual([`storage:${accountId}:2026-11`]);
      const december = { ...deps, clock: { now: () => new Date("2026-12-01T00:05:00Z") } };
      await chargeStoragePeriods(december);
      await chargeStoragePeriods(december);
      expect((await wallet(accountId)).balance).toBe(800);
      const storage = await getStorageBilling(december, await wallet(accountId));
      expect(storage).toEqual({
        tier: "basic",
        sizeGb: 50,
        pricePerPeriod: 200,
        currency: "USD",
        period: { start: "2026-12-01T00:00:00.000Z", end: "2027-01-01T00:00:00.000Z" },
        status: "paid",
      });
    });

    it("when the wallet cannot cover the period, then it is reported unpaid (no negative balance) and settled by the next top-up", async () => {
      const accountId = `acct-${randomUUID()}`;
      const fresh = await readWallet(deps, accountId);
      expect(fresh.balance).toBe(0);
      await chargeStoragePeriods(deps);
      expect((await getStorageBilling(deps, await wallet(accountId))).status).toBe("unpaid");
      const period = await fixture.database.db
        .select()
        .from(storagePeriodsTable)
        .where(eq(storagePeriodsTable.accountId, accountId));
      expect(period[0]).toMatchObject({ status: "unpaid", amount: 200 });
      await creditWallet(deps, accountId, 150);
      expect((await wallet(accountId)).balance).toBe(150);
      await creditWallet(deps, accountId, 100);
      expect((await wallet(accountId)).balance).toBe(50);
      expect((await getStorageBilling(deps, await wallet(accountId))).status).toBe("paid");
    });

    it("when the tier is none, then nothing is billed and the status is none", async () => {
      const noneDeps = { ...deps, settings: { ...deps.settings, defaultStorageTier: "none" as const } };
      const accountId = `acct-${randomUUID()}`;
      await creditWallet(noneDeps, accountId, 500);
      await chargeStoragePeriods(noneDeps);
      expect((await wallet(accountId)).balance).toBe(500);
      expect((await getStorageBilling(noneDeps, await wallet(accountId))).status).toBe("none");
    });
  });

  it("when the account is purged, then the wallet closes, holds are released, starts are refused and the ledger is kept", async () => {
    const accountId = await newAccount(500);
    const sessionId = `s-${randomUUID()}`;
    await authorizeStart(deps, accountId, { sessionId, ratePerMinute: RATE, currency: "USD" });
    await consume(
      createEvent("account.purge", accountId, {
        identityUserId: accountId,
        requestedAt: clock.now().toISOString(),
      }),
    );
    expect(await wallet(accountId)).toMatchObject({ status: "closed", held: 0, balance: 500 });
    await expect(
      authorizeStart(deps, accountId, {
        sessionId: `s-${randomUUID()}`,
        ratePerMinute: RATE,
        currency: "USD",
      }),
    ).rejects.toMatchObject({ code: "ACCOUNT_PENDING_DELETION" });
    const ledger = await fixture.database.db
      .select()
      .from(ledgerEntriesTable)
      .where(eq(ledgerEntriesTable.accountId, accountId));
    expect(ledger.length).toBeGreaterThan(0);
    expect(await findLedgerMismatches(fixture.database.db)).toEqual([]);
  });

  it("when a running session's wallet pays for fewer than 10 more minutes, then credits.low tells sessions once when it runs out, and again (cleared) after a top-up", async () => {
    // 20 + 12 minutes of credit at 10 a minute, with the start hold of 15 minutes.
    const accountId = await newAccount(320);
    const sessionId = `s-${randomUUID()}`;
    await authorizeStart(deps, accountId, { sessionId, ratePerMinute: RATE, currency: "USD" });
    const t0 = clock.now();
    await consume(started(accountId, sessionId, t0));
    const forecasts = async () =>
      (await fixture.database.db.select().from(outboxTable).where(eq(outboxTable.eventType, "credits.low")))
        .map((r) => r.payload as AnyEvent)
        .filter((e) => e.accountId === accountId)
        .map((e) => (e.data as { runsOutAt: string | null }).runsOutAt);
    for (let minute = 1; minute <= 22; minute += 1) {
      clock.set(new Date(t0.getTime() + minute * MINUTE));
      await meterRunningSessions(deps);
    }
    // 32 minutes paid in all (0..31): the credit runs out when minute 32 starts, whatever minute it is said at.
    const runsOut = new Date(t0.getTime() + 32 * MINUTE).toISOString();
    const said = await forecasts();
    expect(said.length).toBeGreaterThan(0);
    expect(new Set(said)).toEqual(new Set([runsOut]));
    // Said once: the forecast does not move while minutes are charged as foreseen.
    const events = await fixture.database.db
      .select()
      .from(outboxTable)
      .where(eq(outboxTable.eventType, "credits.low"));
    expect(events.filter((e) => (e.payload as AnyEvent).accountId === accountId)).toHaveLength(1);

    await creditWallet(deps, accountId, 5_000);
    await reforecastAccount(deps, accountId);
    expect((await forecasts()).at(-1)).toBeNull();
    clock.set(new Date(t0.getTime() + 23 * MINUTE));
    await meterRunningSessions(deps);
    expect((await forecasts()).at(-1)).toBeNull();
    expect(await findLedgerMismatches(fixture.database.db)).toEqual([]);
  });
});
