import { createContractChecker } from "@cgs/shared/testing/contract";
import {
  bruteForceStatus,
  createTestUser,
  keycloakAdmin,
  passwordGrant,
  refreshGrant,
  totpCode,
  uniqueEmail,
  type TestUser,
} from "@cgs/shared/testing/keycloak";
import { messagesTo, waitForMail } from "@cgs/shared/testing/mail";
import { waitUntil } from "@cgs/shared/testing/queue";
import { ResetRepository } from "./data/reset-repository";
import { startAuthProxy, type AuthProxyHarness } from "../../../test/harnesses/auth-proxy-harness";

const contract = createContractChecker();
const REQUEST = "/api/v1/auth/password-reset/request";
const COMPLETE = "/api/v1/auth/password-reset/complete";

let proxy: AuthProxyHarness;
const users: TestUser[] = [];

beforeAll(async () => {
  proxy = await startAuthProxy();
});

afterAll(async () => {
  await Promise.all(users.map((u) => u.remove()));
  await proxy?.close();
});

async function newUser(...args: Parameters<typeof createTestUser>): Promise<TestUser> {
  const user = await createTestUser(...args);
  users.push(user);
  return user;
}

async function post(path: string, body: unknown) {
  const res = await fetch(`${proxy.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, body: text ? JSON.parse(text) : undefined };
}

/** Waits until the reset worker has handled every queued request. */
async function workerIdle(): Promise<void> {
  const resets = new ResetRepository(proxy.database.db);
  await waitUntil(async () => (await resets.pendingRequests()) === 0, {
    timeoutMs: 15_000,
    description: "reset queue drained",
  });
}

function tokenFrom(text: string): string {
  const match = /http:\/\/127\.0\.0\.1:8080\/reset-password\?token=([A-Za-z0-9_.-]+)/.exec(text);
  if (!match) throw new Error(`no reset link in:\n${text}`);
  return match[1]!;
}

async function requestResetToken(email: string, count = 1): Promise<string> {
  const res = await post(REQUEST, { email });
  expect(res.status).toBe(200);
  const mail = await waitForMail(email, { count, timeoutMs: 15_000 });
  return tokenFrom(mail.Text);
}

describe("password reset request", () => {
  it("when the e-mail belongs to an account with a password, then 200 {ok:true} and exactly one e-mail with the link", async () => {
    const user = await newUser(uniqueEmail("reset"), { password: "Original-pass-1" });
    const res = await post(REQUEST, { email: user.email.toUpperCase() });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ok: true });
    contract.assertResponse("POST", REQUEST, 200, res.body);
    const mail = await waitForMail(user.email, { timeoutMs: 15_000 });
    expect(mail.Subject).toBe("Reset your Cloud Gaming password");
    expect(mail.Text).toContain("http://127.0.0.1:8080/reset-password?token=");
    expect(mail.HTML).toContain("http://127.0.0.1:8080/reset-password?token=");
    await workerIdle();
    expect(await messagesTo(user.email)).toHaveLength(1);
  });

  it("when the e-mail is unknown or the account is social-only, then the same answer and no e-mail", async () => {
    const social = await newUser(uniqueEmail("social"), { socialLink: true });
    const unknown = uniqueEmail("nobody");
    for (const email of [unknown, social.email]) {
      const res = await post(REQUEST, { email });
      expect(res.status).toBe(200);
      expect(res.text).toBe('{"ok":true}');
    }
    await workerIdle();
    expect(await messagesTo(unknown)).toHaveLength(0);
    expect(await messagesTo(social.email)).toHaveLength(0);
  });

  it("when the body is not a valid e-mail request, then 400 VALIDATION_ERROR naming the field", async () => {
    const cases: [unknown, string][] = [
      [{}, "email"],
      [{ email: "not-an-address" }, "email"],
      [{ email: 42 }, "email"],
      [{ email: "a@example.com", extra: 1 }, "extra"],
    ];
    for (const [body, field] of cases) {
      const res = await post(REQUEST, body);
      expect(res.status).toBe(400);
      expect(res.body.error).toBe("VALIDATION_ERROR");
      expect(res.body.message).toContain(field);
      contract.assertResponse("POST", REQUEST, 400, res.body);
    }
  });

  it("when known and unknown addresses are requested many times, then status, body, headers and timing do not tell them apart", async () => {
    const known = await newUser(uniqueEmail("enum"), { password: "Original-pass-1" });
    const rounds = 30;
    const timings = { known: [] as number[], unknown: [] as number[] };
    const shapes = new Set<string>();
    const volatile = new Set(["date", "x-request-id", "content-length", "etag"]);
    for (let i = 0; i < rounds; i += 1) {
      const order: ("known" | "unknown")[] = i % 2 === 0 ? ["known", "unknown"] : ["unknown", "known"];
      for (const kind of order) {
        const email = kind === "known" ? known.email : uniqueEmail("nobody");
        const started = process.hrtime.bigint();
        const res = await post(REQUEST, { email });
        timings[kind].push(Number(process.hrtime.bigint() - started) / 1e6);
        const headers = [...res.headers.entries()]
          .filter(([name]) => !volatile.has(name))
          .map(([n, v]) => `${n}: ${v}`)
          .sort()
          .join("\n");
        shapes.add(`${res.status}\n${headers}\n\n${res.text}\n${res.headers.get("content-length")}`);
      }
    }
    expect(shapes.size).toBe(1);
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const knownMedian = median(timings.known);
    const unknownMedian = median(timings.unknown);
    // Both paths do the same work (one queued row); a synchronous identity-provider look-up plus SMTP send
    // on the known path would add tens of milliseconds, far beyond this bound.
    expect(Math.abs(knownMedian - unknownMedian)).toBeLessThan(
      Math.max(5, 0.5 * Math.min(knownMedian, unknownMedian)),
    );
    await workerIdle();
    expect(await messagesTo(known.email)).toHaveLength(rounds);
  }, 120_000);
});

describe("password reset complete", () => {
  it("when completed with a valid link, then the password changes, MFA and other sessions stay, and the lockout is cleared", async () => {
    const user = await newUser(uniqueEmail("complete"), { password: "Original-pass-1", totp: true });
    const before = await passwordGrant(user.email, "Original-pass-1", { totp: totpCode(user.totpSecret!) });
    expect(before.status).toBe(200);
    // Lock the account with failed sign-ins (the realm locks after 5).
    for (let i = 0; i < 5; i += 1) await passwordGrant(user.email, "Wrong-password-0");
    // Keycloak's brute-force protector records failures on a background queue, so the lock lands shortly after;
    // on a loaded machine a failure can be dropped from that queue, so keep failing until the lock shows.
    await waitUntil(
      async () => {
        if ((await bruteForceStatus(user.id)).disabled) return true;
        await passwordGrant(user.email, "Wrong-password-0");
        return false;
      },
      { timeoutMs: 30_000, intervalMs: 500, description: "the account locked by failed sign-ins" },
    );
    // Failures still on that queue would land after the reset clears the lock and, with the two wrong sign-ins
    // below, lock the account again: wait until the count stops moving.
    let failures = -1;
    await waitUntil(
      async () => {
        const now = (await bruteForceStatus(user.id)).numFailures;
        const settled = now === failures;
        failures = now;
        return settled;
      },
      { timeoutMs: 30_000, intervalMs: 1_000, description: "the failed sign-ins all recorded" },
    );

    const token = await requestResetToken(user.email);
    const short = await post(COMPLETE, { token, password: "short" });
    expect(short.status).toBe(400);
    expect(short.body).toMatchObject({ error: "VALIDATION_ERROR" });
    expect(short.body.message).toContain("password");
    contract.assertResponse("POST", COMPLETE, 400, short.body);

    const reused = await post(COMPLETE, { token, password: "Original-pass-1" });
    expect(reused.status).toBe(400);
    expect(reused.body.error).toBe("PASSWORD_REUSED");
    contract.assertResponse("POST", COMPLETE, 400, reused.body);

    const done = await post(COMPLETE, { token, password: "Brand-new-pass-2" });
    expect(done.status).toBe(200);
    expect(done.body).toEqual({ ok: true });
    contract.assertResponse("POST", COMPLETE, 200, done.body);

    expect((await bruteForceStatus(user.id)).disabled).toBe(false);
    const nextCode = totpCode(user.totpSecret!, Date.now() + 30_000);
    const old = await passwordGrant(user.email, "Original-pass-1", { totp: nextCode });
    expect(old.status).toBe(401);
    const withoutSecondFactor = await passwordGrant(user.email, "Brand-new-pass-2");
    expect(withoutSecondFactor.status).toBe(401);
    const credentials = (await (await keycloakAdmin("GET", `/users/${user.id}/credentials`)).json()) as {
      type: string;
    }[];
    expect(credentials.map((c) => c.type).sort()).toEqual(["otp", "password"]);
    const signedIn = await passwordGrant(user.email, "Brand-new-pass-2", { totp: nextCode });
    expect(signedIn.status).toBe(200);
    // The session opened before the reset keeps working.
    expect((await refreshGrant(before.refreshToken!)).status).toBe(200);

    const again = await post(COMPLETE, { token, password: "Another-pass-3" });
    expect(again.status).toBe(400);
    expect(again.body.error).toBe("RESET_TOKEN_INVALID");
  });

  it("when two completes race with one token, then exactly one succeeds", async () => {
    const user = await newUser(uniqueEmail("race"), { password: "Original-pass-1" });
    const token = await requestResetToken(user.email);
    const results = await Promise.all(
      ["Racing-pass-A1", "Racing-pass-B2", "Racing-pass-C3"].map((password) =>
        post(COMPLETE, { token, password }),
      ),
    );
    const ok = results.filter((r) => r.status === 200);
    expect(ok).toHaveLength(1);
    for (const r of results.filter((x) => x.status !== 200)) {
      expect(r.status).toBe(400);
      expect(r.body.error).toBe("RESET_TOKEN_INVALID");
    }
  });

  it("when two links were mailed and one is used, then the other no longer works", async () => {
    const user = await newUser(uniqueEmail("twolinks"), { password: "Original-pass-1" });
    const first = await requestResetToken(user.email);
    const second = await requestResetToken(user.email, 2);
    expect(second).not.toBe(first);
    expect((await post(COMPLETE, { token: second, password: "Second-link-pass-1" })).status).toBe(200);
    const stale = await post(COMPLETE, { token: first, password: "First-link-pass-1" });
    expect(stale.status).toBe(400);
    expect(stale.body.error).toBe("RESET_TOKEN_INVALID");
  });

  it("when the token is older than an hour, altered or garbage, then RESET_TOKEN_EXPIRED or RESET_TOKEN_INVALID", async () => {
    const user = await newUser(uniqueEmail("expiry"), { password: "Original-pass-1" });
    const token = await requestResetToken(user.email);
    proxy.clock.current = new Date(Date.now() + 3_600_000 + 5_000);
    try {
      const late = await post(COMPLETE, { token, password: "Late-password-1" });
      expect(late.status).toBe(400);
      expect(late.body.error).toBe("RESET_TOKEN_EXPIRED");
      contract.assertResponse("POST", COMPLETE, 400, late.body);
    } finally {
      proxy.clock.current = null;
    }
    const middle = Math.floor(token.length / 2);
    const altered = token.slice(0, middle) + (token[middle] === "A" ? "B" : "A") + token.slice(middle + 1);
    for (const bad of [altered, "garbage", `${token}.x`]) {
      const res = await post(COMPLETE, { token: bad, password: "Valid-password-1" });
      expect(res.status).toBe(400);
      expect(res.body.error).toBe("RESET_TOKEN_INVALID");
    }
    // The untouched token still works once: failures did not consume it.
    expect((await post(COMPLETE, { token, password: "Fresh-password-9" })).status).toBe(200);
  });

  it("when the body is incomplete, then 400 VALIDATION_ERROR naming the field", async () => {
    const cases: [unknown, string][] = [
      [{ password: "Long-enough-1" }, "token"],
      [{ token: "x" }, "password"],
      [{ token: "x", password: 1234567890 }, "password"],
      [{ token: "", password: "Long-enough-1" }, "token"],
    ];
    for (const [body, field] of cases) {
      const res = await post(COMPLETE, body);
      expect(res.status).toBe(400);
      expect(res.body.error).toBe("VALIDATION_ERROR");
      expect(res.body.message).toContain(field);
    }
  });
});
