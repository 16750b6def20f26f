import { randomUUID } from "node:crypto";
import { createEvent, createQueueUrlResolver, sendEventMessage } from "@cgs/shared";
import { createTestSqsClient, drainQueue, waitUntil } from "@cgs/shared/testing/queue";
import { startSessionsHarness, type SessionsHarness } from "./testing/sessions-harness";

// The service's real workers: outbox relay and SQS consumer on moto, reconciler and idle-sweep loops.
let h: SessionsHarness;
const sqs = createTestSqsClient();
const resolve = createQueueUrlResolver(sqs);
let n = 0;
const account = () => `wk-${Date.now().toString(36)}-${(n += 1)}`;

beforeAll(async () => {
  h = await startSessionsHarness({ workers: true });
});
afterAll(async () => {
  await h.close();
  sqs.destroy();
});

async function pollState(acct: string) {
  return (await h.call(acct, "GET", "/api/v1/sessions/poll")).body as { state: string; ready: boolean };
}

const billingEvents: Array<{ id: string; type: string; accountId: string; data: Record<string, unknown> }> =
  [];
async function billingEventsFor(acct: string, type: string) {
  const url = await resolve(`${h.config.QUEUE_NAME_PREFIX}cgs-billing`);
  for (const m of await drainQueue(sqs, url, { waitTimeSeconds: 0 })) {
    billingEvents.push(JSON.parse(m.Body ?? "{}") as (typeof billingEvents)[number]);
  }
  return billingEvents.find((e) => e.accountId === acct && e.type === type);
}

async function sendToSessions(event: Parameters<typeof sendEventMessage>[2]) {
  await sendEventMessage(sqs, await resolve(`${h.config.QUEUE_NAME_PREFIX}cgs-sessions`), event);
}

describe("workers", () => {
  it("when billing sends credits.exhausted, then the running session is stopped and session.stopped reaches billing's queue", async () => {
    const acct = account();
    expect((await h.call(acct, "POST", "/api/v1/sessions/start")).status).toBe(200);
    await waitUntil(async () => (await pollState(acct)).ready, { description: "session ready" });
    const started = await waitUntil(() => billingEventsFor(acct, "session.started"), {
      description: "session.started on the billing queue",
    });
    expect(started.data).toMatchObject({ ratePerMinute: 10, currency: "USD" });

    const sessionId = started.data.sessionId as string;
    await sendToSessions(createEvent("credits.exhausted", acct, { sessionId, balance: 0, currency: "USD" }));
    await waitUntil(async () => (await pollState(acct)).state === "stopped", {
      timeoutMs: 15_000,
      description: "session stopped",
    });
    const stopped = await waitUntil(() => billingEventsFor(acct, "session.stopped"), {
      description: "session.stopped on the billing queue",
    });
    expect(stopped.data).toMatchObject({ reason: "credits_exhausted", startedAt: started.data.startedAt });
  });

  it("when credits.exhausted names an older session, then the newer session the player paid for keeps running", async () => {
    const acct = account();
    expect((await h.call(acct, "POST", "/api/v1/sessions/start")).status).toBe(200);
    await waitUntil(async () => (await pollState(acct)).ready, { description: "session ready" });
    await sendToSessions(
      createEvent("credits.exhausted", acct, { sessionId: randomUUID(), balance: 0, currency: "USD" }),
    );
    // A marker event behind it on the same queue: once it is handled, so is the exhausted one.
    await sendToSessions(createEvent("metering.audit", acct, { sessionIds: [randomUUID()] }));
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expect(await pollState(acct)).toMatchObject({ state: "running", ready: true });
    expect(await billingEventsFor(acct, "session.stopped")).toBeUndefined();
  });

  it("when billing audits a session whose stop event it lost, then a fresh session.stopped with the real stop time reaches billing's queue", async () => {
    const acct = account();
    expect((await h.call(acct, "POST", "/api/v1/sessions/start")).status).toBe(200);
    await waitUntil(async () => (await pollState(acct)).ready, { description: "session ready" });
    const started = await waitUntil(() => billingEventsFor(acct, "session.started"), {
      description: "session.started on the billing queue",
    });
    expect((await h.call(acct, "POST", "/api/v1/sessions/stop")).status).toBe(200);
    const first = await waitUntil(() => billingEventsFor(acct, "session.stopped"), {
      description: "session.stopped on the billing queue",
    });
    // Billing never saw that one (lost, or parked in its DLQ): it asks again.
    billingEvents.splice(billingEvents.indexOf(first), 1);
    const sessionId = started.data.sessionId as string;
    await sendToSessions(createEvent("metering.audit", acct, { sessionIds: [sessionId] }));
    const again = await waitUntil(() => billingEventsFor(acct, "session.stopped"), {
      description: "a fresh session.stopped on the billing queue",
    });
    expect(again).not.toHaveProperty("id", (first as { id?: string }).id);
    expect(again.data).toMatchObject({
      sessionId,
      startedAt: started.data.startedAt,
      stoppedAt: first.data.stoppedAt,
    });
  });

  it("when billing placed the hold but its answer to the start was lost, then the start fails and session.failed for that session reaches billing at once", async () => {
    const acct = account();
    h.billing.loseAuthorizationAnswers = true;
    try {
      expect((await h.call(acct, "POST", "/api/v1/sessions/start")).status).toBe(503);
    } finally {
      h.billing.loseAuthorizationAnswers = false;
    }
    const hold = h.billing.holds.find((x) => x.accountId === acct)!;
    expect(hold.released).toBe(false);
    const failed = await waitUntil(() => billingEventsFor(acct, "session.failed"), {
      description: "session.failed on the billing queue",
    });
    expect(failed.data).toMatchObject({ sessionId: hold.sessionId, startedAt: null, reason: "start_failed" });
    expect((await pollState(acct)).state).toBe("idle");
  });

  it("when accounts sends account.purge, then the session is stopped and the account's volume is deleted", async () => {
    const acct = account();
    expect((await h.call(acct, "POST", "/api/v1/sessions/start")).status).toBe(200);
    await waitUntil(async () => (await pollState(acct)).ready, { description: "session ready" });
    const volumes = () => [...h.cloud.volumes.values()].filter((v) => v.accountId === acct);
    expect(volumes()).toHaveLength(1);

    await sendToSessions(
      createEvent("account.purge", acct, { identityUserId: acct, requestedAt: new Date().toISOString() }),
    );
    await waitUntil(async () => (await pollState(acct)).state === "stopped", {
      timeoutMs: 15_000,
      description: "session stopped",
    });
    await waitUntil(() => volumes().length === 0, { timeoutMs: 5_000, description: "volume deleted" });
    const stopped = await waitUntil(() => billingEventsFor(acct, "session.stopped"), {
      description: "session.stopped on the billing queue",
    });
    expect(stopped.data).toMatchObject({ reason: "account_deletion" });
  });
});
