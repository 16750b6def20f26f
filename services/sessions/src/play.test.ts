import { eq } from "drizzle-orm";
import { createEvent, outboxTable, type AnyEvent } from "@cgs/shared";
import { testClock, type TestClock } from "@cgs/shared/testing/clock";
import { signHostReport, type HostReport } from "@cgs/host-agent";
import { sessionsTable } from "./data/session-tables";
import { ingestHostReports } from "./domain/host-reports";
import { sweepPlay } from "./domain/play-sweep";
import { sessionEventHandlers } from "./events/session-event-handlers";
import type { SessionStatus } from "./domain/session-status";
import { startRunningSession, startSessionsHarness, type SessionsHarness } from "./testing/sessions-harness";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let n = 0;
const account = () => `play-${Date.now().toString(36)}-${(n += 1)}`;

async function outboxEvents(h: SessionsHarness, accountId: string): Promise<AnyEvent[]> {
  const rows = await h.database.db.select().from(outboxTable);
  return rows.map((r) => r.payload as AnyEvent).filter((p) => p.accountId === accountId);
}

async function sessionRow(h: SessionsHarness, accountId: string) {
  const [row] = await h.database.db
    .select()
    .from(sessionsTable)
    .where(eq(sessionsTable.accountId, accountId));
  return row!;
}

// Play as the host sees it, end to end: every simulated instance runs the host agent's real code, which signs its
// reports and sends them to the host-report queue on moto; the service's consumer applies them and its play sweep
// warns and stops. A session-clock minute is 700 ms here, so the 5-minute idle timeout is 3.5 s of real time and the
// one-minute idle warning leaves a loaded CI machine 700 ms to answer Keep playing.
describe("idle is counted from play, reported by the host agent", () => {
  const MINUTE = 700;
  let h: SessionsHarness;

  beforeAll(async () => {
    h = await startSessionsHarness({
      workers: true,
      hostAgents: true,
      env: {
        SESSION_MINUTE_MS: String(MINUTE),
        SIMULATOR_AGENT_REPORT_INTERVAL_MS: "150",
        IDLE_SWEEP_INTERVAL_MS: "50",
        HOST_REPORT_STALE_MS: "20000",
        HOST_LOST_AFTER_MS: "60000",
      },
    });
  });
  afterAll(async () => {
    await h.close();
  });
  afterEach(() => expect(h.contractViolations).toEqual([]));

  // Straight to the service: these tests poll far faster than the gateway's 30-a-minute limit allows.
  const poll = async (acct: string): Promise<SessionStatus> =>
    (await h.call(acct, "GET", "/api/v1/sessions/poll", { direct: true })).body;

  /** Start through the gateway and wait (polling) until ready, with the idle timeout at its minimum, 5 minutes. */
  async function readySession(acct: string): Promise<SessionStatus> {
    h.accounts.setPreferences(acct, { idleTimeoutMinutes: 5 });
    expect((await h.call(acct, "POST", "/api/v1/sessions/start")).status).toBe(200);
    for (let i = 0; i < 100; i += 1) {
      const s = await poll(acct);
      if (s.state === "running" && s.ready) return s;
      await sleep(50);
    }
    throw new Error("session did not become ready");
  }

  /** Polls every 50 ms until `done` holds (at most `tries` polls). */
  async function pollUntil(acct: string, done: (s: SessionStatus) => boolean, tries: number) {
    let last: SessionStatus | undefined;
    for (let i = 0; i < tries; i += 1) {
      last = await poll(acct);
      if (done(last)) return last;
      await sleep(50);
    }
    throw new Error(`poll never got there; last: ${JSON.stringify(last)}`);
  }

  /** A player at the streaming client: connected, and input every `everyMs` for `forMs`; no API call. */
  async function play(instanceId: string, forMs: number, options: { input: boolean; everyMs?: number }) {
    const hosts = h.cloud.hosts!;
    for (let i = 0; i < 100 && !hosts.has(instanceId); i += 1) await sleep(20);
    await hosts.play(instanceId, { connected: true, input: options.input });
    const until = Date.now() + forMs;
    while (Date.now() < until) {
      await sleep(options.everyMs ?? 200);
      if (options.input) await hosts.play(instanceId, { input: true });
    }
  }

  it("when a player streams with input and makes no API call for two idle periods, then the session keeps running and every minute of it is billed", async () => {
    const acct = account();
    const ready = await readySession(acct);
    const idlePeriod = 5 * MINUTE;
    await play(ready.instanceId!, 2 * idlePeriod + MINUTE, { input: true });
    const after = await poll(acct);
    expect(after).toMatchObject({ state: "running", ready: true, warning: null, stopReason: null });
    const row = await sessionRow(h, acct);
    expect(row.hostSeq).toBeGreaterThan(0);
    expect(row.clientsConnected).toBe(1);
    expect((await h.call(acct, "POST", "/api/v1/sessions/stop")).body.stopReason).toBe("user");
    // Billing meters from session.started's startedAt to session.stopped's stoppedAt: the whole time played.
    const stopped = (await outboxEvents(h, acct)).find((e) => e.type === "session.stopped");
    const data = stopped!.data as { startedAt: string; stoppedAt: string; reason: string };
    expect(data.reason).toBe("user");
    expect(Date.parse(data.stoppedAt) - Date.parse(data.startedAt)).toBeGreaterThanOrEqual(2 * idlePeriod);
  });

  /** The player's device joins the private network with a key from vpn-key (the simulated network, Headscale's rules). */
  async function deviceJoins(acct: string) {
    const key = (await h.call(acct, "POST", "/api/v1/sessions/vpn-key", { direct: true })).body.key as string;
    return h.privateNetwork.join(key);
  }

  it("when a streaming client stays connected without input for two idle periods while the player's device is on the private network, then that is play too", async () => {
    const acct = account();
    const ready = await readySession(acct);
    await deviceJoins(acct);
    await play(ready.instanceId!, 2 * 5 * MINUTE, { input: false });
    expect(await poll(acct)).toMatchObject({ state: "running", warning: null });
    await h.call(acct, "POST", "/api/v1/sessions/stop");
  });

  it("when the host still counts a streaming client but none of the player's devices is on the private network, then the client is not play: poll warns, a device coming back withdraws the warning, and leaving again stops the session as idle", async () => {
    const acct = account();
    const ready = await readySession(acct);
    const device = await deviceJoins(acct);
    h.privateNetwork.disconnect(device.id);
    const instanceId = ready.instanceId!;
    await h.cloud.hosts!.play(instanceId, { connected: true });
    const warned = await pollUntil(acct, (s) => s.warning?.kind === "idle", 200);
    expect(warned).toMatchObject({ state: "running", warning: { kind: "idle", canKeepPlaying: true } });

    // The device is back on the network: the connected client counts again, and the warning goes.
    const back = await deviceJoins(acct);
    await pollUntil(acct, (s) => s.state === "running" && s.warning === null, 200);

    h.privateNetwork.disconnect(back.id);
    const stopped = await pollUntil(acct, (s) => s.state !== "running", 400);
    expect(stopped).toMatchObject({
      stopReason: "idle",
      message:
        "Stopped after 5 min without play (no input, and none of your devices on the private network).",
    });
    expect((await sessionRow(h, acct)).clientsConnected).toBe(1);
  });

  it("when the portal keeps polling but nobody streams or touches the display, then poll warns first and the session then stops as idle, saying why", async () => {
    const acct = account();
    await readySession(acct);
    const seen: SessionStatus[] = [];
    for (let i = 0; i < 200; i += 1) {
      const s = await poll(acct);
      seen.push(s);
      if (s.state !== "running") break;
      await sleep(50);
    }
    const firstWarning = seen.findIndex((s) => s.warning?.kind === "idle");
    const stopped = seen.findIndex((s) => s.state !== "running");
    expect(firstWarning).toBeGreaterThan(-1);
    expect(stopped).toBeGreaterThan(firstWarning);
    expect(seen[firstWarning]!.message).toMatch(
      /^No input for \d+ min: this session stops at \d\d:\d\d UTC unless you play or choose Keep playing\.$/,
    );
    expect(seen[firstWarning]!.warning).toMatchObject({ canKeepPlaying: true });
    expect(seen[stopped]).toMatchObject({
      stopReason: "idle",
      warning: null,
      message: "Stopped after 5 min without play (no streaming client connected and no input).",
    });
    const event = (await outboxEvents(h, acct)).find((e) => e.type === "session.stopped");
    expect(event?.data).toMatchObject({ reason: "idle" });
  });

  it("when the player chooses Keep playing during the idle warning, then the stop moves one period later, and comes after another period without play", async () => {
    const acct = account();
    await readySession(acct);
    let warned: SessionStatus | undefined;
    for (let i = 0; i < 200 && !warned; i += 1) {
      const s = await poll(acct);
      if (s.warning?.kind === "idle") warned = s;
      else await sleep(50);
    }
    const kept = await h.call(acct, "POST", "/api/v1/sessions/keepalive");
    expect(kept.status).toBe(200);
    expect(kept.body).toMatchObject({ state: "running", warning: null });
    let again: SessionStatus | undefined;
    let end: SessionStatus | undefined;
    for (let i = 0; i < 200 && !end; i += 1) {
      const s = await poll(acct);
      if (s.warning?.kind === "idle") again ??= s;
      if (s.state !== "running") end = s;
      else await sleep(50);
    }
    expect(Date.parse(again!.warning!.stopsAt)).toBeGreaterThan(Date.parse(warned!.warning!.stopsAt));
    expect(end).toMatchObject({ stopReason: "idle" });
  });
});

// Maximum length, credit and a silent host, on a test clock (no real minutes): reports, when a test needs them,
// are the agent's own signed reports handed to the service's intake.
describe("warnings that Keep playing can and cannot postpone", () => {
  let h: SessionsHarness;
  let clock: TestClock;

  beforeAll(async () => {
    clock = testClock();
    h = await startSessionsHarness({
      clock,
      env: { HOST_REPORT_STALE_MS: String(90_000), HOST_LOST_AFTER_MS: String(300_000) },
    });
  });
  afterAll(async () => {
    await h.close();
  });
  afterEach(() => expect(h.contractViolations).toEqual([]));

  const minutes = (m: number) => m * 60_000;
  const poll = async (acct: string): Promise<SessionStatus> =>
    (await h.call(acct, "GET", "/api/v1/sessions/poll")).body;

  /** What the instance's agent sends: its real signing, with the session's own key. */
  function report(
    sessionId: string,
    instanceId: string,
    seq: number,
    fields: Partial<HostReport> = {},
  ): string {
    const at = clock.now().toISOString();
    const body: HostReport = {
      kind: "session",
      instanceId,
      sessionId,
      poolId: null,
      seq,
      sentAt: at,
      observedAt: at,
      clientsConnected: 1,
      lastInputAt: at,
      sunshineAnswers: true,
      certSha256: "cd".repeat(32),
      assignCertSha256: null,
      agentVersion: "test",
      ...fields,
    };
    return JSON.stringify(signHostReport(body, h.vault.agentKey(sessionId)));
  }

  const ingest = (...bodies: string[]) => ingestHostReports(h.deps, h.vault.agentKeys, bodies);

  it("when a session reaches its maximum length, then poll warns, Keep playing adds one extension, and it then stops as max_length", async () => {
    const acct = account();
    h.accounts.setPreferences(acct, { maxSessionLengthMinutes: 30, idleTimeoutMinutes: 240 });
    const running = await startRunningSession(h, acct);
    const { id } = await sessionRow(h, acct);
    let seq = 1;
    const playOn = async () => void (await ingest(report(id, running.instanceId, (seq += 1))));

    clock.advance(minutes(19));
    await playOn();
    expect((await poll(acct)).warning).toBeNull();
    clock.advance(minutes(2));
    await playOn();
    const warned = await poll(acct);
    expect(warned.warning).toMatchObject({ kind: "max_length", canKeepPlaying: true });
    expect(warned.message).toMatch(
      /maximum length of 30 min at \d\d:\d\d UTC and stops then unless you choose Keep playing \(1 h more\)/,
    );

    const kept = (await h.call(acct, "POST", "/api/v1/sessions/keepalive")).body as SessionStatus;
    expect(kept.warning).toBeNull();
    clock.advance(minutes(10));
    await playOn();
    await sweepPlay(h.deps);
    expect((await poll(acct)).state).toBe("running");

    clock.advance(minutes(55));
    await playOn();
    expect((await poll(acct)).warning).toMatchObject({ kind: "max_length" });
    clock.advance(minutes(5));
    await playOn();
    expect((await sweepPlay(h.deps)).stopped).toBe(1);
    expect(await poll(acct)).toMatchObject({
      state: "stopping",
      stopReason: "max_length",
      message: "Stopped at the maximum session length of 1 h 30 min.",
    });
  });

  it("when billing forecasts the credit's end, then poll warns, Keep playing cannot postpone it, and the stop for lack of credit says so", async () => {
    const acct = account();
    await startRunningSession(h, acct);
    const { id } = await sessionRow(h, acct);
    const handlers = sessionEventHandlers(h.deps);
    const runsOutAt = new Date(clock.now().getTime() + minutes(8));
    const low = createEvent(
      "credits.low",
      acct,
      { sessionId: id, runsOutAt: runsOutAt.toISOString(), balance: 80, currency: "USD" },
      { occurredAt: clock.now() },
    );
    await h.database.db.transaction((tx) => handlers["credits.low"]!(low, tx));
    const warned = await poll(acct);
    expect(warned.warning).toEqual({
      kind: "credits",
      stopsAt: runsOutAt.toISOString(),
      canKeepPlaying: false,
    });
    expect(warned.message).toMatch(
      /^Your credit covers about 8 more min: this session stops at \d\d:\d\d UTC unless you top up\.$/,
    );

    const kept = (await h.call(acct, "POST", "/api/v1/sessions/keepalive")).body as SessionStatus;
    expect(kept.warning).toEqual(warned.warning);

    // A forecast made earlier that arrives late (SQS does not order) changes nothing.
    const stale = createEvent(
      "credits.low",
      acct,
      { sessionId: id, runsOutAt: null, balance: 5000, currency: "USD" },
      { occurredAt: new Date(clock.now().getTime() - 60_000) },
    );
    await h.database.db.transaction((tx) => handlers["credits.low"]!(stale, tx));
    expect((await poll(acct)).warning?.kind).toBe("credits");

    const exhausted = createEvent("credits.exhausted", acct, { sessionId: id, balance: 0, currency: "USD" });
    await h.database.db.transaction((tx) => handlers["credits.exhausted"]!(exhausted, tx));
    expect(await poll(acct)).toMatchObject({
      state: "stopping",
      stopReason: "credits_exhausted",
      message: "Stopped because the credit ran out; top up to play again.",
    });
  });

  it("when billing forecasts that a spending limit ends the session, then poll warns naming the limit, Keep playing cannot postpone it, a raised limit takes it away, and the stop at the limit says so in stopReason and message", async () => {
    const acct = account();
    await startRunningSession(h, acct);
    const { id } = await sessionRow(h, acct);
    const handlers = sessionEventHandlers(h.deps);
    const at = (offset: number) => new Date(clock.now().getTime() + offset);
    const daily = { period: "day" as const, amount: 2_000 };
    const forecast = (runsOutAt: Date | null, madeAt: Date) =>
      h.database.db.transaction((tx) =>
        handlers["credits.low"]!(
          createEvent(
            "credits.low",
            acct,
            {
              sessionId: id,
              runsOutAt: runsOutAt?.toISOString() ?? null,
              balance: 5_000,
              currency: "USD",
              ...(runsOutAt
                ? { reason: "spend_limit" as const, spendLimit: daily }
                : { reason: "balance" as const }),
            },
            { occurredAt: madeAt },
          ),
          tx,
        ),
      );
    await forecast(at(minutes(6)), at(0));
    const warned = await poll(acct);
    expect(warned.warning).toEqual({
      kind: "spend_limit",
      stopsAt: at(minutes(6)).toISOString(),
      canKeepPlaying: false,
    });
    expect(warned.message).toMatch(
      /^Your daily spending limit of 20\.00 USD allows about 6 more min: this session stops at \d\d:\d\d UTC unless you raise the limit\.$/,
    );
    const kept = (await h.call(acct, "POST", "/api/v1/sessions/keepalive")).body as SessionStatus;
    expect(kept.warning).toEqual(warned.warning);

    // The player raises the limit: billing forecasts no stop, and the warning goes.
    await forecast(null, at(1_000));
    expect((await poll(acct)).warning).toBeNull();
    await forecast(at(minutes(4)), at(2_000));
    expect((await poll(acct)).warning?.kind).toBe("spend_limit");

    const reached = createEvent("credits.exhausted", acct, {
      sessionId: id,
      balance: 4_800,
      currency: "USD",
      reason: "spend_limit",
      spendLimit: daily,
    });
    await h.database.db.transaction((tx) => handlers["credits.exhausted"]!(reached, tx));
    expect(await poll(acct)).toMatchObject({
      state: "stopping",
      stopReason: "spend_limit",
      message:
        "Stopped at your daily spending limit of 20.00 USD; it allows no more play until 00:00 UTC unless you raise it.",
    });
    const stopped = (await outboxEvents(h, acct)).find((e) => e.type === "session.stopped");
    expect(stopped?.data).toMatchObject({ sessionId: id, reason: "spend_limit" });
  });

  it("when billing refuses a start at a spending limit, then the start answers 409 SPEND_LIMIT_REACHED with billing's words and leaves no session", async () => {
    const acct = account();
    const words =
      "Your monthly spending limit of 50.00 USD leaves 0.00 USD this month, less than the 15 minutes (1.50 USD) a session needs to start; it resets at 2026-12-01 00:00 UTC, or raise it in Billing.";
    h.billing.refuseAtSpendLimit(acct, words);
    const res = await h.call(acct, "POST", "/api/v1/sessions/start");
    expect(res.status).toBe(409);
    expect(res.body).toEqual({ error: "SPEND_LIMIT_REACHED", message: words });
    expect((await poll(acct)).state).toBe("idle");
  });

  it("when a top-up brings the forecast back above the window, then the credit warning goes away", async () => {
    const acct = account();
    await startRunningSession(h, acct);
    const { id } = await sessionRow(h, acct);
    const handlers = sessionEventHandlers(h.deps);
    const at = (offset: number) => new Date(clock.now().getTime() + offset);
    await h.database.db.transaction((tx) =>
      handlers["credits.low"]!(
        createEvent(
          "credits.low",
          acct,
          { sessionId: id, runsOutAt: at(minutes(5)).toISOString(), balance: 50, currency: "USD" },
          { occurredAt: at(0) },
        ),
        tx,
      ),
    );
    expect((await poll(acct)).warning?.kind).toBe("credits");
    await h.database.db.transaction((tx) =>
      handlers["credits.low"]!(
        createEvent(
          "credits.low",
          acct,
          { sessionId: id, runsOutAt: null, balance: 5000, currency: "USD" },
          { occurredAt: at(1000) },
        ),
        tx,
      ),
    );
    expect((await poll(acct)).warning).toBeNull();
    await h.call(acct, "POST", "/api/v1/sessions/stop");
  });

  it("when the host agent stops reporting after readiness, then poll warns and the session ends as instance_lost, charged only up to its last report", async () => {
    const acct = account();
    const running = await startRunningSession(h, acct);
    const { id } = await sessionRow(h, acct);
    clock.advance(minutes(1));
    const lastReport = clock.now();
    expect(await ingest(report(id, running.instanceId, 1))).toEqual(["applied"]);
    clock.advance(minutes(2));
    const warned = await poll(acct);
    expect(warned.warning).toMatchObject({ kind: "host_unhealthy", canKeepPlaying: false });
    expect(warned.message).toContain("The streaming host has not reported since");
    clock.advance(minutes(4));
    expect((await sweepPlay(h.deps)).lost).toBe(1);
    const failed = await poll(acct);
    expect(failed).toMatchObject({ state: "failed", stopReason: "instance_lost" });
    const event = (await outboxEvents(h, acct)).find((e) => e.type === "session.failed");
    expect(event?.data).toMatchObject({ reason: "instance_lost", failedAt: lastReport.toISOString() });
    expect(h.cloud.instance(running.instanceId)?.state).toBe("terminated");
  });

  it("when a report is signed with another session's key or names another instance, then it is refused and changes nothing", async () => {
    const [a, b] = [account(), account()];
    const runA = await startRunningSession(h, a);
    const runB = await startRunningSession(h, b);
    const rowA = await sessionRow(h, a);
    const rowB = await sessionRow(h, b);
    const before = { playSeenAt: rowA.playSeenAt, hostSeq: rowA.hostSeq };
    clock.advance(minutes(3));

    const forgedBody = JSON.parse(report(rowA.id, runA.instanceId, 10)) as { report: HostReport };
    const signedByB = signHostReport(forgedBody.report, h.vault.agentKey(rowB.id));
    const namesB = report(rowA.id, runB.instanceId, 11);
    expect(await ingest(JSON.stringify(signedByB), namesB, "not json", JSON.stringify({ v: 1 }))).toEqual([
      "refused_signature",
      "refused_instance",
      "refused_schema",
      "refused_schema",
    ]);
    const after = await sessionRow(h, a);
    expect({ playSeenAt: after.playSeenAt, hostSeq: after.hostSeq }).toEqual(before);
  });

  it("when a report arrives late, after the stop, or twice, then it does not bring the session back or move it", async () => {
    const acct = account();
    const running = await startRunningSession(h, acct);
    const { id } = await sessionRow(h, acct);
    const first = report(id, running.instanceId, 5);
    expect(await ingest(first)).toEqual(["applied"]);
    expect(await ingest(first)).toEqual(["stale"]);
    await h.call(acct, "POST", "/api/v1/sessions/stop");
    clock.advance(minutes(1));
    expect(await ingest(report(id, running.instanceId, 6))).toEqual(["not_active"]);
    const row = await sessionRow(h, acct);
    expect(row).toMatchObject({ state: "stopping", hostSeq: 5 });
  });

  it("when Keep playing is asked with no running session, then it answers 409 SESSION_NOT_RUNNING", async () => {
    const res = await h.call(account(), "POST", "/api/v1/sessions/keepalive");
    expect(res.status).toBe(409);
    expect(res.body).toEqual({
      error: "SESSION_NOT_RUNNING",
      message: "There is no running session to keep playing",
    });
  });
});
