import { eq, inArray } from "drizzle-orm";
import { outboxTable, type AnyEvent } from "@cgs/shared";
import { claimActiveSessions } from "./data/session-repository";
import { sessionsTable } from "./data/session-tables";
import { Reconciler } from "./domain/reconciler";
import { startSessionsHarness, type SessionsHarness } from "./testing/sessions-harness";

// Real PostgreSQL: row locks, SKIP LOCKED and the partial unique index behave as in production.
let h: SessionsHarness;
let n = 0;
const account = () => `pg-${Date.now().toString(36)}-${(n += 1)}`;

beforeAll(async () => {
  h = await startSessionsHarness({ db: "postgres" });
});
afterAll(async () => {
  await h.close();
});
afterEach(() => {
  expect(h.contractViolations).toEqual([]);
  h.cloud.setBootDelay(0);
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function sessionOf(accountId: string) {
  const rows = await h.database.db.select().from(sessionsTable).where(eq(sessionsTable.accountId, accountId));
  return rows[0]!;
}

const reconcilerSettings = { batchSize: 1000, leaseMs: 30_000, startTimeoutMs: 60_000, describeGraceMs: 0 };

describe("concurrency on PostgreSQL", () => {
  it("when ten starts for one account arrive at once, then exactly one succeeds and one instance is launched", async () => {
    const acct = account();
    const launches = h.cloud.calls.launch;
    const results = await Promise.all(
      Array.from({ length: 10 }, () => h.call(acct, "POST", "/api/v1/sessions/start")),
    );
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).toEqual([200, ...Array<number>(9).fill(409)]);
    for (const r of results.filter((x) => x.status === 409))
      expect(r.body.error).toBe("SESSION_ALREADY_RUNNING");
    expect(h.cloud.calls.launch - launches).toBe(1);
    expect(h.billing.holds.filter((x) => x.accountId === acct)).toHaveLength(1);
    await h.call(acct, "POST", "/api/v1/sessions/stop");
    await h.reconciler.tick();
  });

  it("when two reconciler replicas tick at the same time, then every session is handled by exactly one of them", async () => {
    const accounts = Array.from({ length: 40 }, account);
    for (const acct of accounts) {
      expect((await h.call(acct, "POST", "/api/v1/sessions/start", { direct: true })).status).toBe(200);
    }
    const attaches = h.cloud.calls.attachVolume;
    const a = new Reconciler(h.deps, { ...reconcilerSettings, owner: "replica-a", batchSize: 25 });
    const b = new Reconciler(h.deps, { ...reconcilerSettings, owner: "replica-b", batchSize: 25 });
    const [ra, rb] = await Promise.all([a.tick(), b.tick()]);
    expect(ra.claimed + rb.claimed).toBe(40);
    expect((ra.transitions.ready ?? 0) + (rb.transitions.ready ?? 0)).toBe(40);
    expect(h.cloud.calls.attachVolume - attaches).toBe(40);
    for (const acct of accounts) {
      expect((await h.call(acct, "GET", "/api/v1/sessions/poll", { direct: true })).body.ready).toBe(true);
      await h.call(acct, "POST", "/api/v1/sessions/stop", { direct: true });
    }
    await a.tick();
  });

  it("when one replica holds the lease on a session, then another replica cannot claim it until the lease runs out", async () => {
    const acct = account();
    await h.call(acct, "POST", "/api/v1/sessions/start", { direct: true });
    const first = await claimActiveSessions(h.database.db, "holder", 1000, 300);
    expect(first.map((r) => r.accountId)).toContain(acct);
    const second = await claimActiveSessions(h.database.db, "other", 1000, 300);
    expect(second.map((r) => r.accountId)).not.toContain(acct);
    await new Promise((resolve) => setTimeout(resolve, 350));
    const third = await claimActiveSessions(h.database.db, "other", 1000, 300);
    expect(third.map((r) => r.accountId)).toContain(acct);
    await h.call(acct, "POST", "/api/v1/sessions/stop", { direct: true });
  });

  it("when an instance stays pending past the start timeout, then the session fails and the instance is terminated", async () => {
    const acct = account();
    h.cloud.setBootDelay(60_000);
    const start = await h.call(acct, "POST", "/api/v1/sessions/start");
    const stuck = new Reconciler(h.deps, { ...reconcilerSettings, startTimeoutMs: 200 });
    await stuck.tick();
    expect((await h.call(acct, "GET", "/api/v1/sessions/poll")).body.state).toBe("starting");
    await new Promise((resolve) => setTimeout(resolve, 250));
    await stuck.tick();
    const poll = await h.call(acct, "GET", "/api/v1/sessions/poll");
    expect(poll.body).toMatchObject({ state: "failed", ready: false });
    expect(poll.body.message).toMatch(/did not start/);
    expect(h.cloud.instance(start.body.instanceId)?.state).toBe("terminated");
  });

  it("when a running instance is lost and the reconciler notices it later, then the session's end and session.failed carry the last time it was seen running, not the detection time", async () => {
    const acct = account();
    const reconciler = new Reconciler(h.deps, reconcilerSettings);
    expect((await h.call(acct, "POST", "/api/v1/sessions/start", { direct: true })).status).toBe(200);
    await reconciler.tick();
    const running = await sessionOf(acct);
    expect(running.state).toBe("running");
    expect(running.seenRunningAt).toEqual(running.runningAt);

    await sleep(50);
    const lastPassBegan = new Date();
    await reconciler.tick();
    const seen = (await sessionOf(acct)).seenRunningAt!;
    expect(seen.getTime()).toBeGreaterThanOrEqual(lastPassBegan.getTime());

    await sleep(50);
    expect(h.cloud.loseInstance(running.instanceId!)).toBe(true);
    await sleep(200);
    const detectionBegan = new Date();
    const report = await reconciler.tick();
    expect(report.transitions.failed).toBe(1);

    const failed = await sessionOf(acct);
    expect(failed).toMatchObject({ state: "failed", endedAt: seen });
    const events = (await h.database.db.select().from(outboxTable)).map((r) => r.payload as AnyEvent);
    const event = events.find((e) => e.accountId === acct && e.type === "session.failed");
    const failedAt = new Date((event?.data as { failedAt: string }).failedAt);
    expect(event?.data).toMatchObject({
      reason: "instance_lost",
      startedAt: running.runningAt!.toISOString(),
    });
    expect(failedAt).toEqual(seen);
    expect(failedAt.getTime()).toBeLessThan(detectionBegan.getTime());
    expect(failedAt.getTime()).toBeGreaterThanOrEqual(lastPassBegan.getTime());
  });

  it("when a pass sees many running instances, then all their sessions get the pass's seen-running time in one write", async () => {
    const accounts = Array.from({ length: 30 }, account);
    for (const acct of accounts) {
      expect((await h.call(acct, "POST", "/api/v1/sessions/start", { direct: true })).status).toBe(200);
    }
    const reconciler = new Reconciler(h.deps, reconcilerSettings);
    await reconciler.tick();
    await sleep(20);
    const passBegan = new Date();
    await reconciler.tick();
    const rows = await h.database.db
      .select()
      .from(sessionsTable)
      .where(inArray(sessionsTable.accountId, accounts));
    expect(rows.map((r) => r.state)).toEqual(Array<string>(30).fill("running"));
    // One UPDATE for the batch: every row carries the very same timestamp, taken before the pass's describe.
    const seen = new Set(rows.map((r) => r.seenRunningAt?.getTime()));
    expect(seen.size).toBe(1);
    expect([...seen][0]).toBeGreaterThanOrEqual(passBegan.getTime());
    for (const r of rows) expect(r.seenRunningAt!.getTime()).toBeGreaterThan(r.runningAt!.getTime());
    for (const acct of accounts) await h.call(acct, "POST", "/api/v1/sessions/stop", { direct: true });
    await reconciler.tick();
  });
});
