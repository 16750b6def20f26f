import { randomUUID } from "node:crypto";
import { eq, like } from "drizzle-orm";
import request from "supertest";
import { createEvent, outboxTable, type AnyEvent, type EventData } from "@cgs/shared";
import { createContractChecker } from "@cgs/shared/testing/contract";
import { ledgerEntriesTable, walletsTable } from "../data/billing-tables";
import { findLedgerMismatches } from "../data/wallet-repository";
import { billingEventHandlers } from "../events/billing-event-handlers";
import { startBillingTestService, testClock, type BillingTestService } from "../testing/billing-harness";
import { creditWallet, sessionStarted } from "../testing/wallet-fixtures";
import { meterRunningSessions } from "./metering";
import { chargeStoragePeriods } from "./storage-billing";

const contract = createContractChecker();
const MINUTE = 60_000;
const RATE = 10;
const STORAGE = 200;

describe("spending limits (real PostgreSQL, controlled clock, UTC days and months)", () => {
  let svc: BillingTestService;
  const clock = testClock("2026-11-20T10:00:00.000Z");
  let handlers: ReturnType<typeof billingEventHandlers>;

  beforeAll(async () => {
    svc = await startBillingTestService({ clock });
    handlers = billingEventHandlers(svc.deps);
  });
  afterAll(() => svc.close());
  afterEach(async () => {
    expect(await findLedgerMismatches(svc.database.db)).toEqual([]);
  });

  const account = () => `acct-limits-${randomUUID()}`;
  async function api(acct: string, method: "get" | "patch" | "post", path: string, body?: object) {
    const agent = request(svc.url);
    const call = agent[method](path).set("authorization", `Bearer ${await svc.token(acct)}`);
    const res = body ? await call.send(body) : await call;
    if (path.startsWith("/api/")) contract.assertResponse(method.toUpperCase(), path, res.status, res.body);
    return res;
  }
  const authorize = (acct: string) =>
    api(acct, "post", "/internal/v1/start-authorizations", {
      sessionId: `s-${randomUUID()}`,
      ratePerMinute: RATE,
      currency: "USD",
    });
  const consume = (event: AnyEvent) =>
    svc.database.withTransaction(async (tx) => {
      const handler = handlers[event.type] as (e: AnyEvent, t: typeof tx) => Promise<void>;
      await handler(event, tx);
    });
  const outbox = async <T extends "credits.low" | "credits.exhausted">(type: T, acct: string) =>
    (await svc.database.db.select().from(outboxTable).where(eq(outboxTable.eventType, type)))
      .map((r) => r.payload as AnyEvent)
      .filter((e) => e.accountId === acct)
      .map((e) => e.data as EventData<T>);

  async function startPlaying(acct: string) {
    const auth = await authorize(acct);
    expect(auth.status).toBe(200);
    const sessionId = `s-${randomUUID()}`;
    const startedAt = clock.now();
    await consume(sessionStarted(acct, { sessionId, ratePerMinute: RATE, startedAt }));
    return { sessionId, startedAt };
  }

  it("when the period's spending has reached a limit, then a start is refused with 409 SPEND_LIMIT_REACHED naming the limit and its reset; the next UTC day allows it again", async () => {
    const acct = account();
    await creditWallet(svc.deps, acct, 5_000 + STORAGE);
    // The storage period (200) counts as spending today.
    const limits = await api(acct, "patch", "/api/v1/credits/limits", { daily: 300 });
    expect(limits.status).toBe(200);
    expect(limits.body).toMatchObject({
      daily: 300,
      monthly: null,
      spentToday: STORAGE,
      spentThisMonth: STORAGE,
      dayResetsAt: "2026-11-21T00:00:00.000Z",
      monthResetsAt: "2026-12-01T00:00:00.000Z",
    });
    // 100 left today: less than the 15 minutes (150) a start needs.
    const refused = await authorize(acct);
    expect(refused.status).toBe(409);
    expect(refused.body).toEqual({
      error: "SPEND_LIMIT_REACHED",
      message:
        "Your daily spending limit of 3.00 USD leaves 1.00 USD today, less than the 15 minutes (1.50 USD) a session needs to start; it resets at 00:00 UTC, or raise it in Billing.",
    });
    clock.set("2026-11-21T00:00:01.000Z");
    expect((await api(acct, "get", "/api/v1/credits/limits")).body).toMatchObject({ spentToday: 0 });
    expect((await authorize(acct)).status).toBe(200);
    // A monthly limit the month's spending has reached refuses the same way, naming its reset.
    const monthly = account();
    await creditWallet(svc.deps, monthly, 5_000 + STORAGE);
    await api(monthly, "patch", "/api/v1/credits/limits", { monthly: 250 });
    const refusedMonth = await authorize(monthly);
    expect(refusedMonth.status).toBe(409);
    expect(refusedMonth.body.message).toContain("monthly spending limit of 2.50 USD");
    expect(refusedMonth.body.message).toContain("it resets at 2026-12-01 00:00 UTC");
    clock.set("2026-11-20T10:00:00.000Z");
  });

  it("when a running session reaches the daily limit, then billing warns (credits.low, spend_limit) when fewer than 10 minutes are left, signals the stop at the announced minute, and never charges play past the limit", async () => {
    const acct = account();
    await creditWallet(svc.deps, acct, 5_000 + STORAGE);
    // 200 already spent (storage) + 300 of play = 30 minutes.
    await api(acct, "patch", "/api/v1/credits/limits", { daily: 500 });
    const { sessionId, startedAt } = await startPlaying(acct);
    const at = (minutes: number) => new Date(startedAt.getTime() + minutes * MINUTE);
    for (let m = 1; m <= 25; m += 1) {
      clock.set(at(m));
      await meterRunningSessions(svc.deps);
    }
    const forecasts = await outbox("credits.low", acct);
    expect(forecasts).toHaveLength(1);
    expect(forecasts[0]).toMatchObject({
      sessionId,
      runsOutAt: at(30).toISOString(),
      reason: "spend_limit",
      spendLimit: { period: "day", amount: 500 },
    });
    clock.set(at(29.5));
    await meterRunningSessions(svc.deps);
    expect(await outbox("credits.exhausted", acct)).toEqual([]);
    clock.set(new Date(at(30).getTime() + 1_000));
    await meterRunningSessions(svc.deps);
    expect(await outbox("credits.exhausted", acct)).toEqual([
      expect.objectContaining({
        sessionId,
        reason: "spend_limit",
        spendLimit: { period: "day", amount: 500 },
      }),
    ]);
    // Minutes started before the stop lands are not charged past the limit (recorded as uncovered instead).
    clock.set(new Date(at(32).getTime() + 1_000));
    await meterRunningSessions(svc.deps);
    expect((await api(acct, "get", "/api/v1/credits/limits")).body).toMatchObject({ spentToday: 500 });
    const wallet = (
      await svc.database.db.select().from(walletsTable).where(eq(walletsTable.accountId, acct))
    )[0]!;
    expect(wallet.balance).toBe(5_000 - 300);
    const charged = await svc.database.db
      .select({ amount: ledgerEntriesTable.amount })
      .from(ledgerEntriesTable)
      .where(like(ledgerEntriesTable.reference, `usage:${sessionId}:%`));
    expect(charged.reduce((sum, e) => sum - e.amount, 0)).toBe(300);
    await consume(
      createEvent("session.stopped", acct, {
        sessionId,
        startedAt: startedAt.toISOString(),
        stoppedAt: clock.now().toISOString(),
        ratePerMinute: RATE,
        currency: "USD",
        reason: "spend_limit",
      }),
    );
  });

  it("when the player raises the limit during the warning, then the forecast is cleared at once; lowering it below what is spent warns at once", async () => {
    const acct = account();
    await creditWallet(svc.deps, acct, 5_000 + STORAGE);
    await api(acct, "patch", "/api/v1/credits/limits", { monthly: 400 });
    const { sessionId, startedAt } = await startPlaying(acct);
    for (let m = 1; m <= 15; m += 1) {
      clock.set(new Date(startedAt.getTime() + m * MINUTE));
      await meterRunningSessions(svc.deps);
    }
    expect((await outbox("credits.low", acct)).at(-1)).toMatchObject({
      reason: "spend_limit",
      spendLimit: { period: "month", amount: 400 },
    });
    await api(acct, "patch", "/api/v1/credits/limits", { monthly: null });
    expect((await outbox("credits.low", acct)).at(-1)).toMatchObject({ runsOutAt: null });
    await api(acct, "patch", "/api/v1/credits/limits", { daily: 200 });
    expect((await outbox("credits.low", acct)).at(-1)).toMatchObject({
      sessionId,
      runsOutAt: new Date(startedAt.getTime() + 16 * MINUTE).toISOString(),
      reason: "spend_limit",
      spendLimit: { period: "day", amount: 200 },
    });
    await consume(
      createEvent("session.stopped", acct, {
        sessionId,
        startedAt: startedAt.toISOString(),
        stoppedAt: clock.now().toISOString(),
        ratePerMinute: RATE,
        currency: "USD",
        reason: "user",
      }),
    );
  });

  it("when a daily limit would only be reached after midnight UTC, then it stops nothing: the new day allows it again", async () => {
    const acct = account();
    clock.set("2026-11-20T23:50:00.000Z");
    await creditWallet(svc.deps, acct, 5_000 + STORAGE);
    // 200 spent + 15 more minutes allowed today: past midnight, where the count starts again.
    await api(acct, "patch", "/api/v1/credits/limits", { daily: 350 });
    const { sessionId, startedAt } = await startPlaying(acct);
    for (let m = 1; m <= 20; m += 1) {
      clock.set(new Date(startedAt.getTime() + m * MINUTE));
      await meterRunningSessions(svc.deps);
    }
    expect((await outbox("credits.low", acct)).filter((f) => f.runsOutAt !== null)).toEqual([]);
    expect(await outbox("credits.exhausted", acct)).toEqual([]);
    // Minutes 10-20 started on the 21st (from 00:00 UTC): the new day's count.
    expect((await api(acct, "get", "/api/v1/credits/limits")).body).toMatchObject({ spentToday: 110 });
    await consume(
      createEvent("session.stopped", acct, {
        sessionId,
        startedAt: startedAt.toISOString(),
        stoppedAt: clock.now().toISOString(),
        ratePerMinute: RATE,
        currency: "USD",
        reason: "user",
      }),
    );
    clock.set("2026-11-20T10:00:00.000Z");
  });

  it("when a storage period is charged, then it counts toward the month's spending but is never refused by a limit", async () => {
    const acct = account();
    await creditWallet(svc.deps, acct, 5_000 + STORAGE);
    await api(acct, "patch", "/api/v1/credits/limits", { monthly: 250 });
    clock.set("2026-12-01T08:00:00.000Z");
    await chargeStoragePeriods(svc.deps);
    expect((await api(acct, "get", "/api/v1/billing/storage")).body).toMatchObject({ status: "paid" });
    expect((await api(acct, "get", "/api/v1/credits/limits")).body).toMatchObject({
      monthly: 250,
      spentThisMonth: STORAGE,
    });
    clock.set("2026-11-20T10:00:00.000Z");
  });

  it("when limits are set badly, then the answer is 400 naming the field and nothing changes", async () => {
    const acct = account();
    for (const [body, field] of [
      [{ daily: 0 }, "daily"],
      [{ monthly: 12.5 }, "monthly"],
      [{ weekly: 100 }, "weekly"],
      [{}, "body"],
    ] as const) {
      const res = await api(acct, "patch", "/api/v1/credits/limits", body);
      expect(res.status).toBe(400);
      expect(res.body.message).toContain(field);
    }
    expect((await api(acct, "get", "/api/v1/credits/limits")).body).toMatchObject({
      daily: null,
      monthly: null,
    });
  });
});
