import http from "node:http";
import { Pool } from "pg";
import { metrics } from "@cgs/shared";
import { tamperToken } from "@cgs/shared/testing/tokens";
import { startRunningSession, startSessionsHarness, type SessionsHarness } from "../testing/sessions-harness";
import { POLL_PATH } from "./poll-fast-path";

// The poll is answered in front of Express when it succeeds; these pin down that a client cannot tell.
let h: SessionsHarness;
let n = 0;
const account = () => `poll-${Date.now().toString(36)}-${(n += 1)}`;

beforeAll(async () => {
  h = await startSessionsHarness();
});
afterAll(() => h.close());
afterEach(() => expect(h.contractViolations).toEqual([]));

const stateOf = async (res: Response) => ((await res.json()) as { state: string }).state;
const pollDirect = async (token: string, headers: Record<string, string> = {}) =>
  fetch(`${h.service.url}${POLL_PATH}`, { headers: { authorization: `Bearer ${token}`, ...headers } });

/** A conditional GET through node:http: fetch would add Cache-Control: no-cache, which forbids a 304. */
function conditionalPoll(token: string, etag: string): Promise<number> {
  return new Promise((resolve, reject) => {
    http
      .get(
        `${h.service.url}${POLL_PATH}`,
        { headers: { authorization: `Bearer ${token}`, "if-none-match": etag } },
        (res) => {
          res.resume();
          res.on("end", () => resolve(res.statusCode ?? 0));
        },
      )
      .on("error", reject);
  });
}

async function countedPolls(): Promise<number> {
  const { values } = await metrics.httpRequests.get();
  return (
    values.find(
      (v) => v.labels.route === POLL_PATH && v.labels.method === "GET" && String(v.labels.status) === "200",
    )?.value ?? 0
  );
}

describe("poll served in front of Express", () => {
  it("when a running session is polled, then the answer carries the state, no-store, a weak ETag and the request id", async () => {
    const acct = account();
    await startRunningSession(h, acct);
    const res = await pollDirect(await h.token(acct), { "x-request-id": "poll-req-1" });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json; charset=utf-8");
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(res.headers.get("etag")).toMatch(/^W\/"[0-9a-f]+-[A-Za-z0-9+/]{27}"$/);
    expect(res.headers.get("x-request-id")).toBe("poll-req-1");
    expect(await res.json()).toMatchObject({ state: "running", ready: true, instanceId: expect.any(String) });
  });

  it("when the client sends back the ETag it got, then the service answers 304 Not Modified, and 200 once the session changed", async () => {
    const acct = account();
    await startRunningSession(h, acct);
    const token = await h.token(acct);
    const etag = (await pollDirect(token)).headers.get("etag")!;
    expect(await conditionalPoll(token, etag)).toBe(304);
    expect((await h.call(acct, "POST", "/api/v1/sessions/stop")).status).toBe(200);
    expect(await conditionalPoll(token, etag)).toBe(200);
  });

  it("when the token is altered, then the poll answers 401 UNAUTHENTICATED with the documented message", async () => {
    const acct = account();
    await startRunningSession(h, acct);
    const res = await pollDirect(tamperToken(await h.token(acct)));
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({
      error: "UNAUTHENTICATED",
      message: "Missing or invalid bearer token",
    });
  });

  it("when a token has been used once, then a later poll with it still sees the account's own session and no other", async () => {
    const mine = account();
    const other = account();
    await startRunningSession(h, mine);
    const token = await h.token(other);
    expect(await stateOf(await pollDirect(token))).toBe("idle");
    expect(await stateOf(await pollDirect(token))).toBe("idle");
    expect(await stateOf(await pollDirect(await h.token(mine)))).toBe("running");
  });

  it("when polls succeed, then each is counted under the route template", async () => {
    const acct = account();
    const token = await h.token(acct);
    const before = await countedPolls();
    for (let i = 0; i < 3; i += 1) expect((await pollDirect(token)).status).toBe(200);
    expect(await countedPolls()).toBe(before + 3);
  });

  it("when the poll path is called with another method, then the service answers as it does for any unknown route", async () => {
    const acct = account();
    const res = await fetch(`${h.service.url}${POLL_PATH}`, {
      method: "POST",
      headers: { authorization: `Bearer ${await h.token(acct)}` },
    });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ error: "NOT_FOUND" });
  });
});

describe("poll while the database is gone", () => {
  let down: SessionsHarness;
  beforeAll(async () => {
    down = await startSessionsHarness({ db: "postgres" });
  });
  afterAll(() => down.close().catch(() => undefined));

  it("when the database cannot answer, then the poll asks it once and answers a 5xx error body with no internals", async () => {
    const acct = account();
    const token = await down.token(acct);
    await down.database.close();
    // Every query and transaction takes a connection from the pool: one call is one trip to the database.
    const connects = jest.spyOn(Pool.prototype, "connect");
    try {
      const res = await fetch(`${down.service.url}${POLL_PATH}`, {
        headers: { authorization: `Bearer ${token}`, "x-request-id": "poll-failed-1" },
      });
      expect(res.status).toBeGreaterThanOrEqual(500);
      expect(res.headers.get("x-request-id")).toBe("poll-failed-1");
      const body = (await res.json()) as { error: string; message: string };
      expect(["UNAVAILABLE", "INTERNAL"]).toContain(body.error);
      expect(body.message).not.toMatch(/select|sessions|stack|at /i);
      expect(connects).toHaveBeenCalledTimes(1);
    } finally {
      connects.mockRestore();
    }
  });
});
