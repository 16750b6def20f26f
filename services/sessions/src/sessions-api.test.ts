import { eq } from "drizzle-orm";
import { outboxTable, type AnyEvent } from "@cgs/shared";
import { pairingPinsTable, sessionsTable } from "./data/session-tables";
import { sweepPlay } from "./domain/play-sweep";
import { startRunningSession, startSessionsHarness, type SessionsHarness } from "./testing/sessions-harness";

let h: SessionsHarness;
let n = 0;
const account = () => `acct-${Date.now().toString(36)}-${(n += 1)}`;

beforeAll(async () => {
  h = await startSessionsHarness({ env: { SESSION_START_TIMEOUT_MS: "60000" } });
});
afterAll(async () => {
  await h.close();
});
afterEach(() => {
  expect(h.contractViolations).toEqual([]);
  h.cloud.failNextLaunches(0);
  h.cloud.setCapacityExhausted(false);
  h.cloud.setBootDelay(0);
  h.billing.down = false;
});

const idle = {
  state: "idle",
  instanceId: null,
  publicIp: null,
  privateNetIp: null,
  startedAt: null,
  ready: false,
  message: null,
  warning: null,
  stopReason: null,
  region: null,
  queue: null,
};

async function outboxEvents(accountId: string) {
  const rows = await h.database.db.select().from(outboxTable);
  return rows.map((r) => r.payload as AnyEvent).filter((p) => p.accountId === accountId);
}

const startRunning = (accountId: string) => startRunningSession(h, accountId);

describe("sessions lifecycle through the gateway", () => {
  it("when an account with credits goes through start, poll, pair, connect, vpn-key and stop, then each step answers its documented shape and state", async () => {
    const acct = account();
    const first = await h.call(acct, "GET", "/api/v1/sessions/poll");
    expect(first.status).toBe(200);
    expect(first.body).toEqual(idle);

    h.cloud.setBootDelay(60_000);
    const start = await h.call(acct, "POST", "/api/v1/sessions/start", { body: {} });
    expect(start.status).toBe(200);
    expect(start.body).toMatchObject({ state: "starting", ready: false, publicIp: null });
    // Poll names the phase and what is left of a new machine's typical start (START_ESTIMATE_COLD_SECONDS here).
    expect(start.body.message).toMatch(/^Starting a new machine, about \d+ (s|min)$/);
    expect(start.body.instanceId).toMatch(/^i-/);
    expect(new Date(start.body.startedAt).toISOString()).toBe(start.body.startedAt);

    await h.reconciler.tick();
    expect((await h.call(acct, "GET", "/api/v1/sessions/poll")).body.state).toBe("starting");
    expect((await h.call(acct, "POST", "/api/v1/sessions/pair")).body.error).toBe("NOT_READY");

    h.cloud.setBootDelay(0);
    await h.reconciler.tick();
    const running = await h.call(acct, "GET", "/api/v1/sessions/poll");
    expect(running.body).toMatchObject({ state: "running", ready: true, instanceId: start.body.instanceId });
    expect(running.body.publicIp).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    expect(running.body.privateNetIp).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    expect(Object.keys(running.body).sort()).toEqual(Object.keys(idle).sort());

    const pair = await h.call(acct, "POST", "/api/v1/sessions/pair");
    expect(pair.status).toBe(200);
    expect(pair.body.pin).toMatch(/^\d{4}$/);
    expect(new Date(pair.body.expiresAt).getTime()).toBeGreaterThan(Date.now());
    expect(h.streamingHost.pins.get(running.body.privateNetIp)?.pin).toBe(pair.body.pin);
    const stored = await h.database.db.select().from(pairingPinsTable);
    expect(stored.length).toBeGreaterThan(0);
    for (const row of stored) expect(row.pinDigest).not.toContain(pair.body.pin);

    const connect = await h.call(acct, "GET", "/api/v1/sessions/connect");
    expect(connect.status).toBe(200);
    expect(connect.body).toEqual({ privateNetIp: running.body.privateNetIp, port: 47989 });

    const vpn = await h.call(acct, "POST", "/api/v1/sessions/vpn-key");
    expect(vpn.status).toBe(200);
    expect(vpn.body.key).toMatch(/^tskey-auth-/);
    expect(h.privateNetwork.requests.at(-1)).toMatchObject({
      accountId: acct,
      kind: "device",
      expirySeconds: 600,
    });

    const stop = await h.call(acct, "POST", "/api/v1/sessions/stop");
    expect(stop.status).toBe(200);
    expect(stop.body).toMatchObject({ state: "stopping", ready: false });
    expect(h.cloud.instance(start.body.instanceId)?.state).toBe("terminated");
    const again = await h.call(acct, "POST", "/api/v1/sessions/stop");
    expect(again.body.state).toBe("stopping");

    await h.reconciler.tick();
    const stopped = await h.call(acct, "GET", "/api/v1/sessions/poll");
    expect(stopped.body).toMatchObject({
      state: "stopped",
      ready: false,
      publicIp: null,
      privateNetIp: null,
    });

    const events = await outboxEvents(acct);
    const started = events.find((e) => e.type === "session.started");
    const stoppedEvent = events.find((e) => e.type === "session.stopped");
    expect(started?.data).toMatchObject({
      ratePerMinute: 10,
      currency: "USD",
      instanceId: start.body.instanceId,
    });
    expect(stoppedEvent?.data).toMatchObject({ ratePerMinute: 10, currency: "USD", reason: "user" });
    if (stoppedEvent?.type === "session.stopped" && started?.type === "session.started") {
      expect(stoppedEvent.data.startedAt).toBe(started.data.startedAt);
      expect(Date.parse(stoppedEvent.data.stoppedAt)).toBeGreaterThanOrEqual(
        Date.parse(started.data.startedAt),
      );
    }
  });

  it("when an account starts a second session, then its storage volume is reused, attached, and kept after stop", async () => {
    const acct = account();
    const volumesBefore = h.cloud.calls.createVolume;
    const one = await startRunning(acct);
    await h.call(acct, "POST", "/api/v1/sessions/stop");
    await h.reconciler.tick();
    const two = await startRunning(acct);
    expect(h.cloud.calls.createVolume - volumesBefore).toBe(1);
    const mine = [...h.cloud.volumes.values()].filter((v) => v.accountId === acct);
    expect(mine).toHaveLength(1);
    expect(mine[0]).toMatchObject({ sizeGb: 100, attachedTo: two.instanceId });
    expect(one.instanceId).not.toBe(two.instanceId);
    await h.call(acct, "POST", "/api/v1/sessions/stop");
    expect([...h.cloud.volumes.values()].filter((v) => v.accountId === acct)).toHaveLength(1);
  });
});

describe("preconditions (spec §3 table)", () => {
  it("when a session is active, then start answers 409 SESSION_ALREADY_RUNNING", async () => {
    const acct = account();
    expect((await h.call(acct, "POST", "/api/v1/sessions/start")).status).toBe(200);
    const second = await h.call(acct, "POST", "/api/v1/sessions/start");
    expect(second.status).toBe(409);
    expect(second.body.error).toBe("SESSION_ALREADY_RUNNING");
    await h.call(acct, "POST", "/api/v1/sessions/stop");
  });

  it("when the balance is below 15 minutes at the rate, then start answers 402 INSUFFICIENT_CREDITS and nothing is launched", async () => {
    const acct = account();
    h.billing.setBalance(acct, 149);
    const launches = h.cloud.calls.launch;
    const res = await h.call(acct, "POST", "/api/v1/sessions/start");
    expect(res.status).toBe(402);
    expect(res.body.error).toBe("INSUFFICIENT_CREDITS");
    expect(h.cloud.calls.launch).toBe(launches);
    expect((await h.call(acct, "GET", "/api/v1/sessions/poll")).body).toEqual(idle);
    h.billing.setBalance(acct, 150);
    expect((await h.call(acct, "POST", "/api/v1/sessions/start")).status).toBe(200);
    await h.call(acct, "POST", "/api/v1/sessions/stop");
  });

  it("when the account is pending deletion, then start answers 409 ACCOUNT_PENDING_DELETION", async () => {
    const acct = account();
    h.accounts.setPendingDeletion(acct, true);
    const res = await h.call(acct, "POST", "/api/v1/sessions/start");
    expect(res.status).toBe(409);
    expect(res.body.error).toBe("ACCOUNT_PENDING_DELETION");
    expect(h.billing.holds.filter((x) => x.accountId === acct)).toHaveLength(0);
  });

  it.each([
    ["POST", "/api/v1/sessions/stop"],
    ["POST", "/api/v1/sessions/pair"],
    ["GET", "/api/v1/sessions/connect"],
    ["POST", "/api/v1/sessions/vpn-key"],
  ])("when there is no session, then %s %s answers 409 SESSION_NOT_RUNNING", async (method, route) => {
    const res = await h.call(account(), method, route);
    expect(res.status).toBe(409);
    expect(res.body).toEqual({ error: "SESSION_NOT_RUNNING", message: expect.any(String) });
  });

  it("when the session is starting, then pair and connect answer 409 NOT_READY", async () => {
    const acct = account();
    h.cloud.setBootDelay(60_000);
    await h.call(acct, "POST", "/api/v1/sessions/start");
    await h.reconciler.tick();
    expect((await h.call(acct, "POST", "/api/v1/sessions/pair")).body.error).toBe("NOT_READY");
    expect((await h.call(acct, "GET", "/api/v1/sessions/connect")).body.error).toBe("NOT_READY");
    await h.call(acct, "POST", "/api/v1/sessions/stop");
  });

  it("when the session is running but its streaming host does not answer yet, then pair answers 409 NOT_READY", async () => {
    const acct = account();
    h.streamingHost.setReadyDelay(60_000);
    try {
      await h.call(acct, "POST", "/api/v1/sessions/start");
      await h.reconciler.tick();
      const poll = await h.call(acct, "GET", "/api/v1/sessions/poll");
      expect(poll.body).toMatchObject({ state: "running", ready: false });
      expect((await h.call(acct, "POST", "/api/v1/sessions/pair")).body.error).toBe("NOT_READY");
      h.streamingHost.setReadyDelay(0);
      await h.reconciler.tick();
      expect((await h.call(acct, "GET", "/api/v1/sessions/poll")).body.ready).toBe(true);
      expect((await h.call(acct, "POST", "/api/v1/sessions/pair")).status).toBe(200);
    } finally {
      h.streamingHost.setReadyDelay(0);
      await h.call(acct, "POST", "/api/v1/sessions/stop");
    }
  });

  it("when the session is stopping, then pair answers 409 SESSION_NOT_RUNNING", async () => {
    const acct = account();
    await startRunning(acct);
    await h.call(acct, "POST", "/api/v1/sessions/stop");
    expect((await h.call(acct, "POST", "/api/v1/sessions/pair")).body.error).toBe("SESSION_NOT_RUNNING");
  });

  it("when the start body names an unknown field or a region not offered, then start answers 400 VALIDATION_ERROR naming it", async () => {
    const acct = account();
    const unknown = await h.call(acct, "POST", "/api/v1/sessions/start", { body: { gpu: "big" } });
    expect(unknown.status).toBe(400);
    expect(unknown.body.message).toContain("gpu");
    const region = await h.call(acct, "POST", "/api/v1/sessions/start", { body: { region: "eu-west-3" } });
    expect(region.status).toBe(400);
    expect(region.body).toMatchObject({ error: "VALIDATION_ERROR" });
    expect(region.body.message).toContain("region");
  });

  it("when the request carries no token, then the service itself answers 401 UNAUTHENTICATED", async () => {
    const res = await fetch(`${h.service.url}/api/v1/sessions/poll`);
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({
      error: "UNAUTHENTICATED",
      message: "Missing or invalid bearer token",
    });
  });

  it("when billing is unreachable, then start answers 503 UNAVAILABLE and leaves no session behind", async () => {
    const acct = account();
    h.billing.down = true;
    const res = await h.call(acct, "POST", "/api/v1/sessions/start");
    expect(res.status).toBe(503);
    expect(res.body.error).toBe("UNAVAILABLE");
    h.billing.down = false;
    expect((await h.call(acct, "GET", "/api/v1/sessions/poll")).body).toEqual(idle);
  });
});

describe("faults and retries", () => {
  it("when the region is out of capacity, then start answers 503 CLOUD_CAPACITY with Retry-After, releases the hold and tells billing only that the session never ran", async () => {
    const acct = account();
    h.cloud.failNextLaunches(1);
    const res = await h.call(acct, "POST", "/api/v1/sessions/start");
    expect(res.status).toBe(503);
    expect(res.body.error).toBe("CLOUD_CAPACITY");
    expect(res.headers.get("retry-after")).toBe("30");
    const holds = h.billing.holds.filter((x) => x.accountId === acct);
    expect(holds).toHaveLength(1);
    expect(holds[0]?.released).toBe(true);
    const events = await outboxEvents(acct);
    expect(events.map((e) => [e.type, e.data])).toEqual([
      ["session.failed", expect.objectContaining({ sessionId: holds[0]!.sessionId, startedAt: null })],
    ]);
    expect((await h.call(acct, "GET", "/api/v1/sessions/poll")).body).toEqual(idle);
    const retry = await h.call(acct, "POST", "/api/v1/sessions/start");
    expect(retry.status).toBe(200);
    await h.call(acct, "POST", "/api/v1/sessions/stop");
  });

  it("when a start is retried with the same Idempotency-Key, then the first answer is returned and only one instance is launched", async () => {
    const acct = account();
    const launches = h.cloud.calls.launch;
    const headers = { "Idempotency-Key": `key-${acct}` };
    const [a, b] = await Promise.all([
      h.call(acct, "POST", "/api/v1/sessions/start", { headers }),
      h.call(acct, "POST", "/api/v1/sessions/start", { headers }),
    ]);
    const c = await h.call(acct, "POST", "/api/v1/sessions/start", { headers });
    expect([a.status, b.status, c.status]).toEqual([200, 200, 200]);
    expect(b.body).toEqual(a.body);
    expect(c.body).toEqual(a.body);
    expect(h.cloud.calls.launch - launches).toBe(1);
    const other = await h.call(acct, "POST", "/api/v1/sessions/start", {
      headers: { "Idempotency-Key": "other" },
    });
    expect(other.body.error).toBe("SESSION_ALREADY_RUNNING");
    await h.call(acct, "POST", "/api/v1/sessions/stop");
  });

  it("when a failed start is retried with the same Idempotency-Key, then the retry really starts", async () => {
    const acct = account();
    const headers = { "Idempotency-Key": `cap-${acct}` };
    h.cloud.failNextLaunches(1);
    expect((await h.call(acct, "POST", "/api/v1/sessions/start", { headers })).status).toBe(503);
    expect((await h.call(acct, "POST", "/api/v1/sessions/start", { headers })).status).toBe(200);
    await h.call(acct, "POST", "/api/v1/sessions/stop");
  });

  it("when the running instance disappears, then the reconciler marks the session failed with a message and publishes session.failed", async () => {
    const acct = account();
    const running = await startRunning(acct);
    h.cloud.loseInstance(running.instanceId);
    const report = await h.reconciler.tick();
    expect(report.transitions.failed).toBe(1);
    const poll = await h.call(acct, "GET", "/api/v1/sessions/poll");
    expect(poll.body).toMatchObject({ state: "failed", ready: false });
    expect(poll.body.message).toMatch(/unexpectedly/);
    const failed = (await outboxEvents(acct)).find((e) => e.type === "session.failed");
    expect(failed?.data).toMatchObject({ reason: "instance_lost", ratePerMinute: 10, currency: "USD" });
    expect((await h.call(acct, "POST", "/api/v1/sessions/start")).status).toBe(200);
    await h.call(acct, "POST", "/api/v1/sessions/stop");
  });

  it("when the account's volume no longer exists in the cloud, then the start fails at once saying so and the next start gets a new volume", async () => {
    const acct = account();
    await startRunning(acct);
    await h.call(acct, "POST", "/api/v1/sessions/stop");
    await h.reconciler.tick();
    const [gone] = [...h.cloud.volumes.values()].filter((v) => v.accountId === acct);
    h.cloud.volumes.delete(gone!.volumeId);

    expect((await h.call(acct, "POST", "/api/v1/sessions/start")).status).toBe(200);
    await h.reconciler.tick();
    const poll = await h.call(acct, "GET", "/api/v1/sessions/poll");
    // Failed on the first attach, not after SESSION_START_TIMEOUT_MS (10 min) of retries.
    expect(poll.body).toMatchObject({ state: "failed", message: expect.stringMatching(/no longer exists/) });

    const again = await startRunning(acct);
    const mine = [...h.cloud.volumes.values()].filter((v) => v.accountId === acct);
    expect(mine).toEqual([expect.objectContaining({ attachedTo: again.instanceId })]);
    expect(mine[0]!.volumeId).not.toBe(gone!.volumeId);
    await h.call(acct, "POST", "/api/v1/sessions/stop");
  });

  it("when the streaming host stops answering, then pair retries and then answers 503 UNAVAILABLE", async () => {
    const acct = account();
    const running = await startRunning(acct);
    h.streamingHost.down(running.privateNetIp);
    try {
      const res = await h.call(acct, "POST", "/api/v1/sessions/pair");
      expect(res.status).toBe(503);
      expect(res.body.error).toBe("UNAVAILABLE");
      h.streamingHost.down(running.privateNetIp, false);
      expect((await h.call(acct, "POST", "/api/v1/sessions/pair")).status).toBe(200);
    } finally {
      h.streamingHost.down(running.privateNetIp, false);
      await h.call(acct, "POST", "/api/v1/sessions/stop");
    }
  });

  it("when a pairing PIN has expired, then the housekeeping pass deletes its digest", async () => {
    const acct = account();
    await startRunning(acct);
    expect((await h.call(acct, "POST", "/api/v1/sessions/pair")).status).toBe(200);
    const [session] = await h.database.db
      .select()
      .from(sessionsTable)
      .where(eq(sessionsTable.accountId, acct));
    const pinOf = () =>
      h.database.db.select().from(pairingPinsTable).where(eq(pairingPinsTable.sessionId, session!.id));
    expect(await pinOf()).toHaveLength(1);
    await h.database.db
      .update(pairingPinsTable)
      .set({ expiresAt: new Date(Date.now() - 1000) })
      .where(eq(pairingPinsTable.sessionId, session!.id));
    await sweepPlay(h.deps);
    expect(await pinOf()).toHaveLength(0);
    await h.call(acct, "POST", "/api/v1/sessions/stop");
  });

  it("when faults are set through the simulator control route, then the next start meets a capacity error and a lost instance leaves the instance list and fails", async () => {
    const acct = account();
    const control = (route: string, body?: unknown) =>
      fetch(`${h.service.url}/internal/v1/simulator${route}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    expect((await control("/faults", { failNextLaunches: 1 })).status).toBe(204);
    expect((await h.call(acct, "POST", "/api/v1/sessions/start")).body.error).toBe("CLOUD_CAPACITY");
    const running = await startRunning(acct);
    const listed = async () =>
      (
        (await (await fetch(`${h.service.url}/internal/v1/simulator/instances`)).json()) as {
          items: { instanceId: string; sessionId: string | null; state: string }[];
        }
      ).items;
    expect(await listed()).toContainEqual(
      expect.objectContaining({ instanceId: running.instanceId, state: "running" }),
    );
    expect((await control(`/instances/${running.instanceId}/lose`)).status).toBe(204);
    expect((await listed()).map((i) => i.instanceId)).not.toContain(running.instanceId);
    expect((await control("/instances/i-nope/lose")).status).toBe(404);
    await h.reconciler.tick();
    expect((await h.call(acct, "GET", "/api/v1/sessions/poll")).body.state).toBe("failed");
  });

  it("when nothing was played for the idle timeout, then polling does not keep the session alive: poll warns and the sweep stops it as idle", async () => {
    const acct = account();
    await startRunning(acct);
    await h.database.db
      .update(sessionsTable)
      .set({ playSeenAt: new Date(Date.now() - 16 * 60_000) })
      .where(eq(sessionsTable.accountId, acct));
    const warned = (await h.call(acct, "GET", "/api/v1/sessions/poll")).body;
    expect(warned.warning).toMatchObject({ kind: "idle", canKeepPlaying: true });
    expect(warned.message).toMatch(
      /^No input for 16 min: this session stops at \d\d:\d\d UTC unless you play/,
    );
    expect((await sweepPlay(h.deps)).stopped).toBeGreaterThanOrEqual(1);
    const stopped = (await h.call(acct, "GET", "/api/v1/sessions/poll")).body;
    expect(stopped).toMatchObject({ state: "stopping", stopReason: "idle", warning: null });
    expect(stopped.message).toBe(
      "Stopped after 15 min without play (no streaming client connected and no input).",
    );
    const event = (await outboxEvents(acct)).find((e) => e.type === "session.stopped");
    expect(event?.data).toMatchObject({ reason: "idle" });
  });

  it("when the player stops, then poll keeps the reason until the next start", async () => {
    const acct = account();
    await startRunning(acct);
    await h.call(acct, "POST", "/api/v1/sessions/stop");
    await h.reconciler.tick();
    await h.reconciler.tick();
    expect((await h.call(acct, "GET", "/api/v1/sessions/poll")).body).toMatchObject({
      state: "stopped",
      stopReason: "user",
      message: "Stopped at your request.",
    });
    const again = await startRunning(acct);
    expect(again).toMatchObject({ stopReason: null, message: null });
    await h.call(acct, "POST", "/api/v1/sessions/stop");
  });
});
