import pino from "pino";
import { createClient } from "redis";
import request from "supertest";
import { createJwtVerifier, oidcSettings, startServer, type RunningServer } from "@cgs/shared";
import {
  createTestUser,
  describeWithKeycloak,
  uniqueEmail,
  type TestUser,
} from "@cgs/shared/testing/keycloak";
import { createApp, createGatewayUpstreamPool } from "./app";
import { loadGatewayConfig, type GatewayConfig } from "./config";
import { closedPortUrl, startFakeUpstream, type FakeUpstream } from "../../test/harnesses/gateway-harness";
import { createOidcClient, type OidcClient } from "./portal/oidc-login";
import { refreshCookieSecure } from "./portal/portal-cookies";
import { LOCAL_PORTAL_COOKIE_SECRET } from "./portal/portal-config";
import { openRefreshToken, sealRefreshToken } from "./portal/session-refresh";

const KEYCLOAK = process.env.KEYCLOAK_URL || "http://127.0.0.1:8081";
const ISSUER = `${KEYCLOAK}/realms/cgs`;
const PASSWORD = "Refresh-pass-1";
/** Access tokens issued while the test shortens cgs-portal's lifespan; long enough to finish a sign-in. */
const SHORT_LIFESPAN_SECONDS = 4;
const logger = pino({ level: "silent" });

/**
 * Changing a client needs more than the realm's cgs-admin service account may do (users only), so this uses
 * the test peer's bootstrap administrator (test/peers/peer.sh: admin/admin in the master realm).
 */
async function realmAdmin(method: string, path: string, body?: unknown): Promise<Response> {
  const login = await fetch(`${KEYCLOAK}/realms/master/protocol/openid-connect/token`, {
    method: "POST",
    body: new URLSearchParams({
      grant_type: "password",
      client_id: "admin-cli",
      username: process.env.KEYCLOAK_BOOTSTRAP_ADMIN_USERNAME || "admin",
      password: process.env.KEYCLOAK_BOOTSTRAP_ADMIN_PASSWORD || "admin",
    }),
  });
  if (!login.ok) throw new Error(`master admin login: HTTP ${login.status}`);
  const { access_token } = (await login.json()) as { access_token: string };
  const res = await fetch(`${KEYCLOAK}/admin/realms/cgs${path}`, {
    method,
    headers: {
      authorization: `Bearer ${access_token}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${method} ${path}: HTTP ${res.status} ${await res.text()}`);
  return res;
}

type ClientRepresentation = { id: string; attributes: Record<string, string> } & Record<string, unknown>;

interface BrowserCookies {
  session: string;
  refresh: string;
  /** The Set-Cookie headers of the sign-in callback. */
  setCookies: string[];
}

const cookieValue = (setCookies: string[], name: string): string | undefined =>
  setCookies.map((c) => new RegExp(`^${name}=([^;]*)`).exec(c)?.[1]).find((v) => v !== undefined);

/** A signed token (three base64url parts): what a renewed cookie holds, never a clearing cookie's empty value. */
const JWT = /^eyJ[\w-]+\.[\w-]+\.[\w-]+$/;

const jwtExp = (token: string): number =>
  (JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString("utf8")) as { exp: number }).exp;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until the access token's exp has passed (the test's verifier allows no clock skew). */
async function untilExpired(token: string): Promise<void> {
  const wait = jwtExp(token) * 1000 + 1_100 - Date.now();
  if (wait > 0) await sleep(wait);
}

/** Keycloak's cookies, kept between the authorize page and the login form post. */
function jar() {
  const cookies = new Map<string, string>();
  return {
    take(res: Response) {
      for (const c of res.headers.getSetCookie()) {
        const [pair] = c.split(";");
        const eq = pair!.indexOf("=");
        cookies.set(pair!.slice(0, eq), pair!.slice(eq + 1));
      }
    },
    header: () => [...cookies].map(([k, v]) => `${k}=${v}`).join("; "),
  };
}

describeWithKeycloak()("portal browser session refresh (real Keycloak)", () => {
  let gateway: RunningServer;
  /** A second replica behind the same public origin, sharing Redis with the first. */
  let replica: RunningServer;
  let replicaBase: string;
  let redis: ReturnType<typeof createClient>;
  let base: string;
  let config: GatewayConfig;
  let accounts: FakeUpstream;
  let sessions: FakeUpstream;
  let user: TestUser;
  let refreshCalls = 0;
  // Three independent sign-ins whose access tokens expire seconds after the test starts.
  let basic: BrowserCookies;
  let concurrent: BrowserCookies;
  let toSignOut: BrowserCookies;
  let acrossReplicas: BrowserCookies;
  let replayed: BrowserCookies;

  /** Authorization code + PKCE with plain HTTP: the gateway's /login/start, Keycloak's form, the callback. */
  async function signIn(): Promise<BrowserCookies> {
    const start = await fetch(`${base}/login/start`, { redirect: "manual" });
    const loginState = cookieValue(start.headers.getSetCookie(), "cgs_login")!;
    const kc = jar();
    const authorize = await fetch(start.headers.get("location")!, { redirect: "manual" });
    kc.take(authorize);
    const page = await authorize.text();
    const action = /<form[^>]*id="kc-form-login"[^>]*action="([^"]+)"/
      .exec(page)?.[1]
      ?.replaceAll("&amp;", "&");
    if (!action) throw new Error(`no Keycloak login form (HTTP ${authorize.status})`);
    const posted = await fetch(action, {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded", cookie: kc.header() },
      body: new URLSearchParams({ username: user.email, password: PASSWORD, credentialId: "" }),
    });
    const back = posted.headers.get("location") ?? "";
    if (!back.startsWith(`${base}/login/callback?`)) throw new Error(`login form answered ${posted.status}`);
    const callback = await fetch(back, {
      redirect: "manual",
      headers: { cookie: `cgs_login=${loginState}` },
    });
    expect(callback.status).toBe(302);
    expect(callback.headers.get("location")).toBe("/");
    const setCookies = callback.headers.getSetCookie();
    return {
      session: cookieValue(setCookies, "cgs_session")!,
      refresh: cookieValue(setCookies, "cgs_refresh")!,
      setCookies,
    };
  }

  /** This suite's own copy of cgs-portal, so shortening its token lifespan never touches other suites. */
  let portalClient: ClientRepresentation;

  async function createPortalClientCopy(): Promise<ClientRepresentation> {
    const [original] = (await (await realmAdmin("GET", "/clients?clientId=cgs-portal")).json()) as [
      ClientRepresentation,
    ];
    const { id: _id, ...copy } = original;
    const clientId = `cgs-portal-refresh-test-${Date.now()}`;
    const protocolMappers = ((copy.protocolMappers as Record<string, unknown>[] | undefined) ?? []).map(
      ({ id: _mapperId, ...mapper }) => mapper,
    );
    const created = await realmAdmin("POST", "/clients", { ...copy, clientId, protocolMappers });
    if (created.status !== 201) throw new Error(`creating the test portal client: HTTP ${created.status}`);
    const [client] = (await (await realmAdmin("GET", `/clients?clientId=${clientId}`)).json()) as [
      ClientRepresentation,
    ];
    return client;
  }

  /** The copy's access token lifespan, shortened while the suite signs in. */
  async function withShortAccessTokens<T>(fn: () => Promise<T>): Promise<T> {
    const client = portalClient;
    await realmAdmin("PUT", `/clients/${client.id}`, {
      ...client,
      attributes: { ...client.attributes, "access.token.lifespan": String(SHORT_LIFESPAN_SECONDS) },
    });
    try {
      return await fn();
    } finally {
      // Keycloak keeps attributes a PUT leaves out; an empty value removes one.
      const lifespan = client.attributes["access.token.lifespan"] ?? "";
      await realmAdmin("PUT", `/clients/${client.id}`, {
        ...client,
        attributes: { ...client.attributes, "access.token.lifespan": lifespan },
      });
    }
  }

  const api = (
    path: string,
    cookies: Partial<Record<"cgs_session" | "cgs_refresh", string>>,
    init: RequestInit = {},
    origin = base,
  ) =>
    fetch(`${origin}${path}`, {
      ...init,
      redirect: "manual",
      headers: {
        ...(init.headers as Record<string, string> | undefined),
        cookie: Object.entries(cookies)
          .map(([k, v]) => `${k}=${v}`)
          .join("; "),
      },
    });

  beforeAll(async () => {
    accounts = await startFakeUpstream("accounts");
    sessions = await startFakeUpstream("sessions");
    base = await closedPortUrl();
    const down = await closedPortUrl();
    portalClient = await createPortalClientCopy();
    config = loadGatewayConfig({
      PORTAL_OIDC_CLIENT_ID: String(portalClient.clientId),
      LOG_LEVEL: "silent",
      PORT: new URL(base).port,
      PUBLIC_BASE_URL: base,
      OIDC_ISSUER: ISSUER,
      OIDC_AUDIENCE: "cgs-api",
      OIDC_ALLOWED_AZP: String(portalClient.clientId),
      ACCOUNTS_URL: accounts.url,
      SESSIONS_URL: sessions.url,
      BILLING_URL: down,
      AUTH_PROXY_URL: down,
    });
    const keycloak = createOidcClient({ issuer: ISSUER, clientId: config.PORTAL_OIDC_CLIENT_ID });
    const counted: OidcClient = {
      ...keycloak,
      refresh: (token) => {
        refreshCalls += 1;
        return keycloak.refresh(token);
      },
    };
    redis = createClient({
      url: process.env.REDIS_URL || "redis://127.0.0.1:6379",
      disableOfflineQueue: true,
    });
    await redis.connect();
    const startReplica = async (port: number) => {
      const pool = createGatewayUpstreamPool(config);
      return startServer(
        createApp({
          config,
          logger,
          // No clock tolerance, so a token is refused as soon as its exp has passed.
          verifier: createJwtVerifier({ ...oidcSettings(config), clockToleranceSeconds: 0 }),
          upstreamPool: pool,
          oidc: counted,
          redis: { sendCommand: (args) => redis.sendCommand(args) },
        }),
        { port, logger, shutdownGraceMs: 500, onClose: () => pool.destroy() },
      );
    };
    gateway = await startReplica(config.PORT);
    replicaBase = await closedPortUrl();
    replica = await startReplica(Number(new URL(replicaBase).port));
    user = await createTestUser(uniqueEmail("refresh"), { password: PASSWORD });
    [basic, concurrent, toSignOut, acrossReplicas, replayed] = await withShortAccessTokens(async () => [
      await signIn(),
      await signIn(),
      await signIn(),
      await signIn(),
      await signIn(),
    ]);
  }, 60_000);

  afterAll(async () => {
    if (portalClient) await realmAdmin("DELETE", `/clients/${portalClient.id}`);
    await user?.remove();
    await gateway?.stop();
    await replica?.stop();
    await redis?.quit();
    await accounts?.close();
    await sessions?.close();
  });

  it("when the sign-in callback answers, then the refresh token is in an encrypted HttpOnly SameSite=Strict cookie living as long as Keycloak's SSO idle timeout", async () => {
    const refreshCookie = basic.setCookies.find((c) => c.startsWith("cgs_refresh="))!;
    // The committed realm: ssoSessionIdleTimeout 30 days = Keycloak's refresh_expires_in for a new session.
    expect(refreshCookie).toMatch(
      /^cgs_refresh=[^;]+; Max-Age=259(1\d{3}|2000); Path=\/; HttpOnly; SameSite=Strict$/,
    );
    expect(basic.refresh.split(".")).toHaveLength(5);
    const refreshToken = await openRefreshToken(basic.refresh, LOCAL_PORTAL_COOKIE_SECRET);
    expect(refreshToken).toMatch(/^ey/);
    expect(basic.refresh).not.toContain(refreshToken!.split(".")[1]);
    expect(await openRefreshToken(basic.refresh, "another-secret-of-at-least-32-characters")).toBeNull();
    expect(jwtExp(basic.session) - Date.now() / 1000).toBeLessThanOrEqual(SHORT_LIFESPAN_SECONDS);
  });

  it("when the access cookie has expired and the refresh cookie is valid, then the request succeeds with a new token and both cookies are renewed", async () => {
    await untilExpired(basic.session);
    const expired = await api("/api/v1/session", { cgs_session: basic.session });
    expect(expired.status).toBe(401);

    accounts.requests.length = 0;
    const before = refreshCalls;
    const res = await api("/api/v1/session", { cgs_session: basic.session, cgs_refresh: basic.refresh });
    expect(res.status).toBe(200);
    expect(refreshCalls).toBe(before + 1);
    const setCookies = res.headers.getSetCookie();
    const newSession = cookieValue(setCookies, "cgs_session")!;
    const newRefresh = cookieValue(setCookies, "cgs_refresh")!;
    expect(newSession).toMatch(JWT);
    expect(newSession).not.toBe(basic.session);
    expect(await openRefreshToken(newRefresh, LOCAL_PORTAL_COOKIE_SECRET)).toMatch(JWT);
    expect(newRefresh).not.toBe(basic.refresh);
    // The lifespan override was restored before the refresh: a normal one-hour token now.
    expect(jwtExp(newSession) - Date.now() / 1000).toBeGreaterThan(3000);
    expect(setCookies.find((c) => c.startsWith("cgs_session="))).toMatch(
      /; Max-Age=3\d{3}; Path=\/; HttpOnly; SameSite=Lax$/,
    );
    expect(setCookies.find((c) => c.startsWith("cgs_refresh="))).toMatch(/; SameSite=Strict$/);
    // Upstream gets the new access token as a bearer, and is told the caller used the cookie.
    expect(accounts.requests).toHaveLength(1);
    expect(accounts.requests[0]!.headers.authorization).toBe(`Bearer ${newSession}`);
    expect(accounts.requests[0]!.headers["x-cgs-auth-method"]).toBe("cookie");
    expect(accounts.requests[0]!.headers.cookie).toBeUndefined();

    // The renewed cookies work on their own, without another refresh.
    const again = await api("/api/v1/session", { cgs_session: newSession, cgs_refresh: newRefresh });
    expect(again.status).toBe(200);
    expect(again.headers.getSetCookie()).toEqual([]);
    expect(refreshCalls).toBe(before + 1);

    // A browser drops the access cookie at its Max-Age: the refresh cookie alone restores the session.
    const onlyRefresh = await api("/api/v1/session", { cgs_refresh: newRefresh });
    expect(onlyRefresh.status).toBe(200);
    expect(cookieValue(onlyRefresh.headers.getSetCookie(), "cgs_session")).toMatch(JWT);
    expect(refreshCalls).toBe(before + 2);
  });

  it("when two requests carry the same expired access cookie, then both succeed through one refresh and get the same cookies", async () => {
    await untilExpired(concurrent.session);
    const before = refreshCalls;
    const cookies = { cgs_session: concurrent.session, cgs_refresh: concurrent.refresh };
    const [a, b] = await Promise.all([api("/api/v1/session", cookies), api("/api/v1/session", cookies)]);
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(refreshCalls).toBe(before + 1);
    expect(cookieValue(a.headers.getSetCookie(), "cgs_session")).toMatch(JWT);
    expect(cookieValue(a.headers.getSetCookie(), "cgs_session")).not.toBe(concurrent.session);
    expect(a.headers.getSetCookie()).toEqual(b.headers.getSetCookie());
  });

  it("when two gateway replicas sharing Redis get the same expired browser session at once, then both requests succeed through one refresh and set the same cookies", async () => {
    await untilExpired(acrossReplicas.session);
    const before = refreshCalls;
    const cookies = { cgs_session: acrossReplicas.session, cgs_refresh: acrossReplicas.refresh };
    const [a, b] = await Promise.all([
      api("/api/v1/session", cookies),
      api("/api/v1/session", cookies, {}, replicaBase),
    ]);
    // Refresh tokens rotate and a used one is refused: a second token-endpoint call would have signed one out.
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(refreshCalls).toBe(before + 1);
    // The same tokens; each replica seals its refresh cookie itself (a fresh IV), so compare what it holds.
    const [cookiesA, cookiesB] = [a.headers.getSetCookie(), b.headers.getSetCookie()];
    expect(cookieValue(cookiesA, "cgs_session")).toMatch(JWT);
    expect(cookieValue(cookiesA, "cgs_session")).toBe(cookieValue(cookiesB, "cgs_session"));
    const renewed = cookieValue(cookiesA, "cgs_refresh")!;
    const rotated = await openRefreshToken(renewed, LOCAL_PORTAL_COOKIE_SECRET);
    expect(rotated).toBe(
      await openRefreshToken(cookieValue(cookiesB, "cgs_refresh"), LOCAL_PORTAL_COOKIE_SECRET),
    );
    expect(rotated).not.toBe(await openRefreshToken(acrossReplicas.refresh, LOCAL_PORTAL_COOKIE_SECRET));
    // The rotated refresh cookie keeps working on either replica.
    const later = await api("/api/v1/session", { cgs_refresh: renewed }, {}, replicaBase);
    expect(later.status).toBe(200);
  });

  it("when the old refresh cookie is replayed by another client within the in-flight window, then it is refused on either replica, while the refreshing browser's own late request gets the new cookies", async () => {
    await untilExpired(replayed.session);
    const before = refreshCalls;
    const old = { cgs_session: replayed.session, cgs_refresh: replayed.refresh };
    // The test connects from loopback, which TRUST_PROXY trusts: X-Forwarded-For is the client's address.
    const browser = { "x-forwarded-for": "198.51.100.7", "user-agent": "PlayerBrowser/1.0" };
    const first = await api("/api/v1/session", old, { headers: browser });
    expect(first.status).toBe(200);
    const rotated = cookieValue(first.headers.getSetCookie(), "cgs_session");
    expect(rotated).toMatch(JWT);

    const elsewhere = [
      { "x-forwarded-for": "203.0.113.9", "user-agent": "PlayerBrowser/1.0" },
      { "x-forwarded-for": "198.51.100.7", "user-agent": "curl/8.0" },
    ];
    for (const origin of [base, replicaBase]) {
      for (const headers of elsewhere) {
        accounts.requests.length = 0;
        const replay = await api("/api/v1/session", old, { headers }, origin);
        expect(replay.status).toBe(401);
        expect(await replay.json()).toMatchObject({ error: "UNAUTHENTICATED" });
        // No tokens, and no clearing either: the browser that refreshed keeps its new cookies.
        expect(replay.headers.getSetCookie()).toEqual([]);
        expect(accounts.requests).toHaveLength(0);
      }
      // The same browser's request that was still in flight with the old cookie: the same new tokens.
      const late = await api("/api/v1/session", old, { headers: browser }, origin);
      expect(late.status).toBe(200);
      expect(cookieValue(late.headers.getSetCookie(), "cgs_session")).toBe(rotated);
    }
    expect(refreshCalls).toBe(before + 1);
    // The browser's rotated refresh cookie carries on, from wherever it goes next.
    const renewed = cookieValue(first.headers.getSetCookie(), "cgs_refresh")!;
    const next = await api("/api/v1/session", { cgs_refresh: renewed }, { headers: elsewhere[0] });
    expect(next.status).toBe(200);
  });

  it("when the refresh cookie is tampered with or sealed with another secret, then 401 UNAUTHENTICATED and both cookies are cleared", async () => {
    const flipped =
      basic.refresh.slice(0, 60) + (basic.refresh[60] === "A" ? "B" : "A") + basic.refresh.slice(61);
    const foreign = await sealRefreshToken(
      (await openRefreshToken(basic.refresh, LOCAL_PORTAL_COOKIE_SECRET))!,
      3600,
      "another-secret-of-at-least-32-characters",
    );
    const before = refreshCalls;
    accounts.requests.length = 0;
    for (const refresh of [flipped, foreign, "not-a-jwe"]) {
      const res = await api("/api/v1/session", { cgs_session: basic.session, cgs_refresh: refresh });
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({ error: "UNAUTHENTICATED", message: expect.any(String) });
      const setCookies = res.headers.getSetCookie();
      expect(setCookies).toContainEqual(expect.stringMatching(/^cgs_session=; Max-Age=0; Path=\/; HttpOnly/));
      expect(setCookies).toContainEqual(expect.stringMatching(/^cgs_refresh=; Max-Age=0; Path=\/; HttpOnly/));
    }
    expect(refreshCalls).toBe(before);
    expect(accounts.requests).toHaveLength(0);
  });

  it("when the browser signed out, then its refresh token is revoked at Keycloak and a replayed refresh cookie gets 401", async () => {
    const refreshToken = (await openRefreshToken(toSignOut.refresh, LOCAL_PORTAL_COOKIE_SECRET))!;
    const out = await api(
      "/logout",
      { cgs_session: toSignOut.session, cgs_refresh: toSignOut.refresh },
      { method: "POST", headers: { origin: base } },
    );
    expect(out.status).toBe(303);
    expect(out.headers.getSetCookie()).toEqual([
      expect.stringMatching(/^cgs_session=; Max-Age=0; Path=\/; HttpOnly; SameSite=Lax$/),
      expect.stringMatching(/^cgs_refresh=; Max-Age=0; Path=\/; HttpOnly; SameSite=Strict$/),
    ]);

    // Keycloak itself refuses the token now.
    const direct = await fetch(`${ISSUER}/protocol/openid-connect/token`, {
      method: "POST",
      body: new URLSearchParams({
        grant_type: "refresh_token",
        refresh_token: refreshToken,
        client_id: "cgs-portal",
      }),
    });
    expect(direct.status).toBe(400);
    expect(await direct.json()).toMatchObject({ error: "invalid_grant" });

    await untilExpired(toSignOut.session);
    const replay = await api("/api/v1/session", {
      cgs_session: toSignOut.session,
      cgs_refresh: toSignOut.refresh,
    });
    expect(replay.status).toBe(401);
    expect(await replay.json()).toMatchObject({ error: "UNAUTHENTICATED" });
    expect(replay.headers.getSetCookie()).toContainEqual(expect.stringMatching(/^cgs_refresh=; Max-Age=0;/));
  });

  it("when a write from another origin carries only cookies, then 401 and no refresh happens; from the portal's origin it passes", async () => {
    const signedIn = await signIn();
    const before = refreshCalls;
    sessions.requests.length = 0;
    for (const origin of ["https://evil.example.com", "null"]) {
      const res = await api(
        "/api/v1/sessions/stop",
        { cgs_refresh: signedIn.refresh },
        { method: "POST", headers: { origin } },
      );
      expect(res.status).toBe(401);
      expect(res.headers.getSetCookie()).toEqual([]);
    }
    expect(refreshCalls).toBe(before);
    expect(sessions.requests).toHaveLength(0);

    const same = await api(
      "/api/v1/sessions/stop",
      { cgs_refresh: signedIn.refresh },
      { method: "POST", headers: { origin: base } },
    );
    expect(same.status).toBe(200);
    expect(refreshCalls).toBe(before + 1);
    expect(sessions.requests).toHaveLength(1);
  });

  it("when a request carries a bearer header, then the refresh cookie is ignored", async () => {
    const before = refreshCalls;
    const res = await api(
      "/api/v1/session",
      { cgs_refresh: concurrent.refresh },
      { headers: { authorization: "Bearer not.a.token" } },
    );
    expect(res.status).toBe(401);
    expect(res.headers.getSetCookie()).toEqual([]);
    expect(refreshCalls).toBe(before);
  });
});

describe("refresh cookie without a reachable identity provider", () => {
  it("when the identity provider is down during a refresh, then 503 UNAVAILABLE and the cookies are kept", async () => {
    const down = await closedPortUrl();
    const config = loadGatewayConfig({
      LOG_LEVEL: "silent",
      PUBLIC_BASE_URL: "http://127.0.0.1:8080",
      OIDC_ISSUER: down,
      OIDC_AUDIENCE: "cgs-api",
      ACCOUNTS_URL: down,
      SESSIONS_URL: down,
      BILLING_URL: down,
      AUTH_PROXY_URL: down,
    });
    const app = createApp({ config, logger, verifier: createJwtVerifier(oidcSettings(config)) });
    const sealed = await sealRefreshToken("opaque-refresh-token", 3600, LOCAL_PORTAL_COOKIE_SECRET);
    const res = await request(app).get("/api/v1/session").set("cookie", `cgs_refresh=${sealed}`);
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({ error: "UNAVAILABLE" });
    expect(res.headers["retry-after"]).toBe("5");
    expect(res.headers["set-cookie"]).toBeUndefined();
  });

  it("when the public origin is plain-HTTP loopback, then the refresh cookie is not Secure; anywhere else it is", () => {
    expect(refreshCookieSecure("http://127.0.0.1:8080")).toBe(false);
    expect(refreshCookieSecure("http://localhost:8080")).toBe(false);
    expect(refreshCookieSecure("https://play.example.com")).toBe(true);
    expect(refreshCookieSecure("http://play.example.com")).toBe(true);
  });

  it("when a sealed refresh cookie is past its own expiry, then it does not open", async () => {
    const sealed = await sealRefreshToken("rt", 60, LOCAL_PORTAL_COOKIE_SECRET, Date.now() - 61_000);
    expect(await openRefreshToken(sealed, LOCAL_PORTAL_COOKIE_SECRET)).toBeNull();
    const fresh = await sealRefreshToken("rt", 60, LOCAL_PORTAL_COOKIE_SECRET);
    expect(await openRefreshToken(fresh, LOCAL_PORTAL_COOKIE_SECRET)).toBe("rt");
  });
});
