import { and, eq } from "drizzle-orm";
import { sessionsTable } from "./data/session-tables";
import { streamingCredentialsTable } from "./data/streaming-credential-tables";
import { startRunningSession, startSessionsHarness, type SessionsHarness } from "./testing/sessions-harness";

// One player, one host: per-instance streaming-host credentials, sealed at rest and never in an API answer,
// and private-network keys that reach only their own account's instance.
let h: SessionsHarness;
let n = 0;
const account = () => `iso-${Date.now().toString(36)}-${(n += 1)}`;

beforeAll(async () => {
  h = await startSessionsHarness({ env: { SESSION_START_TIMEOUT_MS: "60000", VPN_KEY_MAX_LIVE: "2" } });
});
afterAll(() => h.close());
afterEach(() => expect(h.contractViolations).toEqual([]));

async function startRunning(accountId: string) {
  const running = await startRunningSession(h, accountId);
  const [row] = await h.database.db
    .select({ id: sessionsTable.id })
    .from(sessionsTable)
    .where(and(eq(sessionsTable.accountId, accountId), eq(sessionsTable.state, "running")));
  return { ...running, sessionId: row!.id };
}

describe("one player, one host", () => {
  it("when two players start sessions, then each instance gets its own streaming-host credentials, stored sealed and never returned by the API", async () => {
    const a = await startRunning(account());
    const b = await startRunning(account());
    const credA = await h.vault.forSession(a.sessionId);
    const credB = await h.vault.forSession(b.sessionId);
    expect(credA).toBeDefined();
    expect(credB).toBeDefined();
    expect(credA!.password).not.toBe(credB!.password);
    expect(credA!.username).not.toBe(credB!.username);
    expect(h.cloud.installedCredentials(a.privateNetIp)).toEqual(credA);

    const [stored] = await h.database.db
      .select()
      .from(streamingCredentialsTable)
      .where(eq(streamingCredentialsTable.sessionId, a.sessionId));
    expect(stored!.sealedPassword).not.toContain(credA!.password);
    // Sealed with the session id as associated data: a row copied to another session does not open.
    await h.database.db
      .update(streamingCredentialsTable)
      .set({ sealedPassword: stored!.sealedPassword })
      .where(eq(streamingCredentialsTable.sessionId, b.sessionId));
    await expect(h.vault.forSession(b.sessionId)).rejects.toThrow();
  });

  it("when one host is presented another instance's credentials, then it refuses them (pairing fails, readiness is false)", async () => {
    const acctA = account();
    const acctB = account();
    const a = await startRunning(acctA);
    const b = await startRunning(acctB);
    expect(await h.streamingHost.isReady(b.privateNetIp, b.sessionId)).toBe(true);
    expect(await h.streamingHost.isReady(b.privateNetIp, a.sessionId)).toBe(false);
    await expect(h.streamingHost.submitPin(b.privateNetIp, a.sessionId, "1234", "x")).rejects.toThrow(/401/);

    const answers = [
      await h.call(acctA, "GET", "/api/v1/sessions/poll"),
      await h.call(acctA, "POST", "/api/v1/sessions/pair"),
      await h.call(acctA, "GET", "/api/v1/sessions/connect"),
      await h.call(acctA, "POST", "/api/v1/sessions/vpn-key"),
    ];
    const credA = await h.vault.forSession(a.sessionId);
    for (const res of answers) {
      expect(res.status).toBe(200);
      expect(JSON.stringify(res.body)).not.toContain(credA!.password);
      expect(JSON.stringify(res.body)).not.toContain(credA!.username);
    }
  });

  it("when account A's device joins with A's key, then it reaches A's host and is refused by B's host", async () => {
    const acctA = account();
    const acctB = account();
    const a = await startRunning(acctA);
    const b = await startRunning(acctB);
    const keyA = await h.call(acctA, "POST", "/api/v1/sessions/vpn-key");
    expect(keyA.status).toBe(200);
    expect(h.privateNetwork.requests.at(-1)).toMatchObject({ accountId: acctA, kind: "device" });

    const deviceA = h.privateNetwork.join(keyA.body.key as string);
    expect(h.privateNetwork.canReach(deviceA.id, a.privateNetIp)).toBe(true);
    expect(h.privateNetwork.canReach(deviceA.id, b.privateNetIp)).toBe(false);
    expect(() => h.privateNetwork.join(keyA.body.key as string)).toThrow(/invalid auth key/);
  });

  it("when an account already holds the most live keys, then another vpn-key answers 429 with Retry-After", async () => {
    const acct = account();
    await startRunning(acct);
    expect((await h.call(acct, "POST", "/api/v1/sessions/vpn-key")).status).toBe(200);
    expect((await h.call(acct, "POST", "/api/v1/sessions/vpn-key")).status).toBe(200);
    const third = await h.call(acct, "POST", "/api/v1/sessions/vpn-key");
    expect(third.status).toBe(429);
    expect(third.body).toEqual({
      error: "RATE_LIMITED",
      message: expect.stringContaining("At most 2 unused private-network keys"),
    });
    expect(Number(third.headers.get("retry-after"))).toBeGreaterThan(0);
  });
});
