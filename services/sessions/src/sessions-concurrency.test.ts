import { claimActiveSessions } from "./data/session-repository";
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
});
