import { randomUUID } from "node:crypto";
import request from "supertest";
import { createContractChecker } from "@cgs/shared/testing/contract";
import { findLedgerMismatches } from "./data/wallet-repository";
import { meterRunningSessions, startMetering, stopMetering, type SessionStart } from "./domain/metering";
import { startBillingTestService, type BillingTestService } from "./testing/billing-harness";
import { creditWallet } from "./testing/wallet-fixtures";

const contract = createContractChecker();
const PATH = "/api/v1/credits/transactions";
const MINUTE = 60_000;
const RATE = 10;

interface Tx {
  id: string;
  type: string;
  amount: number;
  balanceAfter: number;
  sessionId: string | null;
  paymentId: string | null;
  minutes: number | null;
}

describe("GET /api/v1/credits/transactions (real PostgreSQL)", () => {
  let svc: BillingTestService;

  beforeAll(async () => {
    svc = await startBillingTestService({ env: { STORAGE_DEFAULT_TIER: "none" } });
  });
  afterAll(() => svc.close());

  const get = async (accountId: string, query: Record<string, string | number> = {}) => {
    const res = await request(svc.url)
      .get(PATH)
      .query(query)
      .set("authorization", `Bearer ${await svc.token(accountId)}`);
    contract.assertResponse("GET", PATH, res.status, res.body);
    return res;
  };
  const session = (accountId: string): SessionStart => ({
    accountId,
    sessionId: randomUUID(),
    ratePerMinute: RATE,
    currency: "USD",
    startedAt: svc.clock.now(),
  });
  const play = async (start: SessionStart, minutes: number) => {
    await svc.database.db.transaction((tx) => startMetering(tx, svc.deps, start));
    svc.clock.advance(minutes * MINUTE - 1_000);
    await svc.database.db.transaction((tx) => stopMetering(tx, svc.deps, start, svc.clock.now()));
    svc.clock.advance(1_000);
  };

  it("when a session runs for several minutes, then it is one play entry with its minutes, cost and session", async () => {
    const acct = `acct-tx-${randomUUID()}`;
    const topup = await creditWallet(svc.deps, acct, 1_000);
    const start = session(acct);
    await play(start, 7);
    const res = await get(acct);
    expect(res.status).toBe(200);
    const items = res.body.items as Tx[];
    expect(items).toHaveLength(2);
    expect(items[0]).toMatchObject({
      type: "play",
      amount: -7 * RATE,
      minutes: 7,
      sessionId: start.sessionId,
      paymentId: null,
      balanceAfter: 1_000 - 7 * RATE,
      description: "Play, 7 min",
    });
    expect(items[1]).toMatchObject({
      type: "topup",
      amount: 1_000,
      paymentId: topup.paymentIntentId,
      minutes: null,
    });
    expect(res.body.nextCursor).toBeNull();
  });

  it("when 1,000 entries are paged through while new ones arrive and a running session keeps charging, then every entry appears exactly once, newest first", async () => {
    const acct = `acct-tx-many-${randomUUID()}`;
    await creditWallet(svc.deps, acct, 50_000);
    const running = session(acct);
    await svc.database.db.transaction((tx) => startMetering(tx, svc.deps, running));
    for (let i = 1; i < 999; i++) {
      if (i % 2 === 0) await creditWallet(svc.deps, acct, 500 + i);
      else await play(session(acct), 1 + (i % 3));
    }
    const first = await get(acct, { limit: 200 });
    expect(first.status).toBe(200);
    const seen: Tx[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res = await get(acct, cursor ? { limit: 37, cursor } : { limit: 37 });
      expect(res.status).toBe(200);
      seen.push(...(res.body.items as Tx[]));
      cursor = res.body.nextCursor as string | null;
      pages += 1;
      // Meanwhile: a new top-up, a new finished session, and the running session's next minutes.
      await creditWallet(svc.deps, acct, 600);
      await play(session(acct), 2);
      await meterRunningSessions(svc.deps);
    } while (cursor);
    expect(pages).toBe(Math.ceil(1_000 / 37));
    const ids = seen.map((t) => Number(t.id));
    expect(new Set(ids).size).toBe(1_000);
    expect(ids).toEqual([...ids].sort((a, b) => b - a));
    expect(ids.slice(0, 200)).toEqual((first.body.items as Tx[]).map((t) => Number(t.id)));
    const runningLine = seen.filter((t) => t.sessionId === running.sessionId);
    expect(runningLine).toHaveLength(1);
    expect(seen.filter((t) => t.type === "play")).toHaveLength(500);
    const fresh = await get(acct, { limit: 200 });
    const mine = (fresh.body.items as Tx[]).find((t) => t.sessionId === running.sessionId);
    expect(fresh.body.items[0].id).not.toBe(first.body.items[0].id);
    expect(mine).toBeUndefined(); // the running session sits at its first minute, far below the newest lines
    expect(await findLedgerMismatches(svc.database.db)).toEqual([]);
  });

  it.each([
    [{ limit: 0 }, "limit"],
    [{ limit: 201 }, "limit"],
    [{ limit: "ten" }, "limit"],
    [{ cursor: "not-a-cursor" }, "cursor"],
    [{ colour: "red" }, "colour"],
  ])("when the query is %j, then 400 VALIDATION_ERROR naming %s", async (query, field) => {
    const res = await get("acct-tx-bad", query as Record<string, string | number>);
    expect(res.status).toBe(400);
    expect(res.body.error).toBe("VALIDATION_ERROR");
    expect(res.body.message).toContain(field);
  });

  it("when no bearer token is sent, then 401", async () => {
    const res = await request(svc.url).get(PATH);
    expect(res.status).toBe(401);
    contract.assertResponse("GET", PATH, 401, res.body);
  });
});
