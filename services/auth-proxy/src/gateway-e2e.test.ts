import pino from "pino";
import { createJwtVerifier, oidcSettings, startServer, type RunningServer } from "@cgs/shared";
import { createTestUser, passwordGrant, uniqueEmail, type TestUser } from "@cgs/shared/testing/keycloak";
import { waitForMail } from "@cgs/shared/testing/mail";
import { TEST_ALLOWED_AZP_ENV } from "@cgs/shared/testing/tokens";
import { createGatewayApp, createGatewayUpstreamPool, loadGatewayConfig } from "@cgs/gateway";
import { closedPortUrl } from "../../../test/harnesses/gateway-harness";
import { startTestAccounts, type TestAccountsServer } from "../../../test/harnesses/accounts-server";
import { startAuthProxy, type AuthProxyHarness } from "../../../test/harnesses/auth-proxy-harness";

type Json = Record<string, unknown>;
const json = async (res: Response): Promise<Json> => (await res.json()) as Json;

const ISSUER = `${process.env.KEYCLOAK_URL || "http://127.0.0.1:8081"}/realms/cgs`;
const logger = pino({ level: "silent" });

let accounts: TestAccountsServer;
let authProxy: AuthProxyHarness;
const gateways: RunningServer[] = [];
const users: TestUser[] = [];

async function startGateway(env: Record<string, string> = {}): Promise<RunningServer> {
  const down = await closedPortUrl();
  const config = loadGatewayConfig({
    LOG_LEVEL: "silent",
    PORT: "0",
    OIDC_ISSUER: ISSUER,
    OIDC_ALLOWED_AZP: TEST_ALLOWED_AZP_ENV,
    PUBLIC_BASE_URL: "http://127.0.0.1:8080",
    ACCOUNTS_URL: accounts.url,
    AUTH_PROXY_URL: authProxy.url,
    SESSIONS_URL: down,
    BILLING_URL: down,
    ...env,
  });
  const pool = createGatewayUpstreamPool(config);
  const gateway = await startServer(
    createGatewayApp({
      config,
      logger,
      verifier: createJwtVerifier(oidcSettings(config)),
      upstreamPool: pool,
    }),
    { port: 0, logger, shutdownGraceMs: 500, onClose: () => pool.destroy() },
  );
  gateways.push(gateway);
  return gateway;
}

beforeAll(async () => {
  accounts = await startTestAccounts({
    db: "postgres",
    name: "e2e_accounts",
    env: { OIDC_ISSUER: ISSUER, OIDC_ALLOWED_AZP: TEST_ALLOWED_AZP_ENV },
  });
  authProxy = await startAuthProxy();
}, 60_000);

afterAll(async () => {
  for (const g of gateways) await g.stop();
  await Promise.all(users.map((u) => u.remove()));
  await authProxy?.close();
  await accounts?.close();
});

async function signedInUser(): Promise<{ user: TestUser; token: string }> {
  const user = await createTestUser(uniqueEmail("e2e"), { password: "Original-pass-1" });
  users.push(user);
  const grant = await passwordGrant(user.email, "Original-pass-1");
  expect(grant.status).toBe(200);
  return { user, token: grant.accessToken! };
}

describe("through the gateway with Keycloak tokens", () => {
  it("when a signed-in user reads and patches settings and reads the session, then the gateway and accounts agree", async () => {
    const gateway = await startGateway();
    const { user, token } = await signedInUser();
    const auth = { authorization: `Bearer ${token}` };
    const settings = await fetch(`${gateway.url}/api/v1/settings`, { headers: auth });
    expect(settings.status).toBe(200);
    expect((await json(settings)).fps).toBe(60);

    const patched = await fetch(`${gateway.url}/api/v1/settings`, {
      method: "PATCH",
      headers: { ...auth, "content-type": "application/merge-patch+json" },
      body: JSON.stringify({ fps: 120 }),
    });
    expect(patched.status).toBe(200);
    expect((await json(patched)).fps).toBe(120);

    for (const [body, field] of [
      [{ fps: 45 }, "fps"],
      [{ resolution: "1x1" }, "resolution"],
      [{ unknown: true }, "unknown"],
    ] as const) {
      const bad = await fetch(`${gateway.url}/api/v1/settings`, {
        method: "PATCH",
        headers: { ...auth, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      expect(bad.status).toBe(400);
      const error = await json(bad);
      expect(error.error).toBe("VALIDATION_ERROR");
      expect(error.message).toContain(field);
    }

    const viaCookie = await fetch(`${gateway.url}/api/v1/session`, {
      headers: { cookie: `cgs_session=${token}` },
    });
    const identity = await json(viaCookie);
    expect(identity).toMatchObject({ identityUserId: user.id, email: user.email, authMethod: "cookie" });
    const exp = JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString()).exp as number;
    expect(identity.expiresAt).toBe(new Date(exp * 1000).toISOString());

    const crossSite = await fetch(`${gateway.url}/api/v1/account/delete`, {
      method: "DELETE",
      headers: { cookie: `cgs_session=${token}`, origin: "https://evil.example.com" },
    });
    expect(crossSite.status).toBe(401);
    const deleted = await fetch(`${gateway.url}/api/v1/account/delete`, {
      method: "DELETE",
      headers: { cookie: `cgs_session=${token}`, origin: "http://127.0.0.1:8080" },
    });
    expect(deleted.status).toBe(202);
    expect((await json(deleted)).status).toBe("pending_deletion");
  });

  it("when a reset is requested and completed through the gateway, then the new password signs in", async () => {
    const gateway = await startGateway();
    const { user } = await signedInUser();
    const post = (p: string, body: unknown) =>
      fetch(`${gateway.url}${p}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    expect((await post("/api/v1/auth/password-reset/request", { email: user.email })).status).toBe(200);
    const mail = await waitForMail(user.email, { timeoutMs: 15_000 });
    const token = /reset-password\?token=([A-Za-z0-9_.-]+)/.exec(mail.Text)![1]!;
    const short = await post("/api/v1/auth/password-reset/complete", { token, password: "short" });
    expect(short.status).toBe(400);
    expect((await json(short)).message).toContain("password");
    const done = await post("/api/v1/auth/password-reset/complete", { token, password: "Gateway-pass-22" });
    expect(done.status).toBe(200);
    expect(await json(done)).toEqual({ ok: true });
    expect((await passwordGrant(user.email, "Gateway-pass-22")).status).toBe(200);
    expect((await passwordGrant(user.email, "Original-pass-1")).status).toBe(401);
  });

  it("when reset requests repeat, then they are limited per e-mail address and per client IP", async () => {
    const gateway = await startGateway({ RATE_LIMIT_RESET_EMAIL: "3", RATE_LIMIT_WRITE: "6" });
    const request = (email: string) =>
      fetch(`${gateway.url}/api/v1/auth/password-reset/request`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ email }),
      });
    const email = uniqueEmail("limited");
    const statuses: number[] = [];
    for (let i = 0; i < 4; i += 1) statuses.push((await request(email)).status);
    expect(statuses).toEqual([200, 200, 200, 429]);
    const other = await request(uniqueEmail("other"));
    expect(other.status).toBe(200);
    const limited = await request(uniqueEmail("third"));
    expect(limited.status).toBe(200);
    const overIp = await request(uniqueEmail("fourth"));
    expect(overIp.status).toBe(429);
    expect(overIp.headers.get("retry-after")).toMatch(/^\d+$/);
    expect(await json(overIp)).toMatchObject({ error: "RATE_LIMITED" });
  });
});
