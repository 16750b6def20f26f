import { createHash } from "node:crypto";
import { startTestIdentityProvider, type TestIdentityProvider } from "@cgs/shared/testing/tokens";
import { startTestGateway, type TestGateway } from "../../../test/harnesses/gateway-harness";
import { openLoginState } from "./oidc-login";
import { LOCAL_PORTAL_COOKIE_SECRET } from "./portal-config";

let idp: TestIdentityProvider;
let gateway: TestGateway;

beforeAll(async () => {
  idp = await startTestIdentityProvider();
  gateway = await startTestGateway(idp, { env: { PUBLIC_BASE_URL: "http://127.0.0.1:8080" } });
});

afterAll(async () => {
  await gateway.close();
  await idp.close();
});

const get = (path: string, headers: Record<string, string> = {}) =>
  fetch(`${gateway.url}${path}`, { headers, redirect: "manual" });

describe("portal pages", () => {
  const expectStrictPage = async (res: Response, headers: Record<string, string> = {}) => {
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain("unsafe-inline");
    expect(res.headers.get("cache-control")).toBe("no-store");
    const page = await res.text();
    expect(page).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    const assets = [...page.matchAll(/(?:src|href)="(\/portal\/[^"]+)"/g)].map((m) => m[1]!);
    for (let i = 0; i < assets.length; i++) {
      const loaded = await get(assets[i]!, headers);
      expect([assets[i], loaded.status]).toEqual([assets[i], 200]);
      expect(loaded.headers.get("content-type")).toMatch(/^text\/(javascript|css)/);
      // A module's own imports are assets too.
      const body = await loaded.text();
      for (const [, rel] of body.matchAll(/(?:from|import) "\.\/([a-z-]+\.js)"/g)) {
        const next = `/portal/js/${rel}`;
        if (!assets.includes(next)) assets.push(next);
      }
    }
    return page;
  };

  it.each(["/login", "/forgot-password", "/reset-password"])(
    "when %s is opened, then it is HTML under a CSP without inline scripts, and its assets load",
    async (path) => {
      await expectStrictPage(await get(path));
    },
  );

  it.each(["/", "/billing", "/settings", "/settings/tokens", "/account"])(
    "when %s is opened signed out, then the browser is sent to /login",
    async (path) => {
      const res = await get(path);
      expect(res.status).toBe(302);
      expect(res.headers.get("location")).toBe("/login");
    },
  );

  it.each(["/", "/billing", "/settings", "/settings/tokens", "/account"])(
    "when %s is opened signed in, then it is HTML under the strict CSP, with navigation, and its module scripts load",
    async (path) => {
      const cookie = `cgs_session=${await idp.sign({ sub: "portal-pages" })}`;
      const page = await expectStrictPage(await get(path, { cookie }), { cookie });
      expect(page).toContain('<nav aria-label="Main">');
      expect(page).toContain('id="grace-banner"');
      expect(page).toMatch(/<script type="module" src="\/portal\/js\/[a-z-]+\.js"><\/script>/);
    },
  );

  it("when beacon origins are configured, then the signed-in pages may fetch them (connect-src) and the sign-in pages may not", async () => {
    const beacons = "https://beacon.eu-west-1.example, https://beacon.us-east-1.example:8443";
    const withBeacons = await startTestGateway(idp, {
      env: { PUBLIC_BASE_URL: "http://127.0.0.1:8080", PORTAL_BEACON_ORIGINS: beacons },
    });
    try {
      const connectSrc = async (path: string, headers: Record<string, string> = {}) => {
        const res = await fetch(`${withBeacons.url}${path}`, { headers, redirect: "manual" });
        return /connect-src ([^;]*)/.exec(res.headers.get("content-security-policy") ?? "")?.[1];
      };
      const cookie = `cgs_session=${await idp.sign({ sub: "beacon-csp" })}`;
      for (const path of ["/", "/settings"]) {
        expect(await connectSrc(path, { cookie })).toBe(
          "'self' https://beacon.eu-west-1.example https://beacon.us-east-1.example:8443",
        );
      }
      expect(await connectSrc("/login")).toBe("'self'");
      // The default outside production: the simulator's beacons.
      const local = await get("/", { cookie });
      expect(/connect-src ([^;]*)/.exec(local.headers.get("content-security-policy") ?? "")?.[1]).toBe(
        "'self' http://127.0.0.1:8108",
      );
    } finally {
      await withBeacons.close();
    }
  });

  it("when /settings/tokens is opened signed in, then the page shows that cookie's token, uncached; from another site it does not", async () => {
    const token = await idp.sign({ sub: "token-page" });
    const res = await get("/settings/tokens", {
      cookie: `cgs_session=${token}`,
      "sec-fetch-site": "same-origin",
    });
    expect(res.headers.get("cache-control")).toBe("no-store");
    const page = await res.text();
    expect(page).toContain(token);
    expect(page).toContain("export SERVICE_BASE_URL=http://127.0.0.1:8080");
    expect(page).toContain("cgs login --with-token");
    const cross = await (
      await get("/settings/tokens", { cookie: `cgs_session=${token}`, "sec-fetch-site": "cross-site" })
    ).text();
    expect(cross).not.toContain(token);
  });

  it("when the checkout sends the player back to /account with a top-up outcome, then it lands on /billing", async () => {
    const res = await get("/account?topup=success&session_id=cs_local_1");
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe("/billing?topup=success");
  });

  it("when /login carries the password-updated status, then the banner shows; an unknown status shows nothing", async () => {
    const updated = await (await get("/login?status=password-updated")).text();
    expect(updated).toContain('id="banner"');
    expect(updated).toContain("Password updated");
    const other = await (await get("/login?status=%3Cscript%3Ealert(1)%3C/script%3E")).text();
    expect(other).not.toContain('id="banner"');
    expect(other).not.toContain("<script>alert");
  });

  it("when the reset page is opened, then the form has the two password fields the spec names", async () => {
    const page = await (await get("/reset-password?token=abc")).text();
    expect(page).toContain('id="password"');
    expect(page).toContain('id="confirm"');
    expect(page).not.toContain("abc");
    const forgot = await (await get("/forgot-password")).text();
    expect(forgot.match(/<input /g)).toHaveLength(1);
    expect(forgot).toContain('type="email"');
  });

  it("when an unknown portal asset is asked for, then 404 NOT_FOUND", async () => {
    const res = await get("/portal/nope.js");
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ error: "NOT_FOUND" });
  });
});

describe("portal sign-in", () => {
  it("when /login/start is opened, then it redirects to the issuer's authorize endpoint with PKCE S256 and a signed state cookie", async () => {
    // The test identity provider publishes a discovery document pointing at its own paths.
    const res = await get("/login/start");
    expect(res.status).toBe(302);
    const location = new URL(res.headers.get("location")!);
    const setCookie = res.headers.get("set-cookie") ?? "";
    expect(setCookie).toMatch(/^cgs_login=[^;]+; Max-Age=600; Path=\/login; HttpOnly; SameSite=Lax$/);
    const saved = openLoginState(/^cgs_login=([^;]+)/.exec(setCookie)![1], LOCAL_PORTAL_COOKIE_SECRET);
    expect(saved).not.toBeNull();
    expect(Object.fromEntries(location.searchParams)).toEqual({
      response_type: "code",
      client_id: "cgs-portal",
      redirect_uri: "http://127.0.0.1:8080/login/callback",
      scope: "openid email",
      state: saved!.state,
      code_challenge: createHash("sha256").update(saved!.verifier).digest("base64url"),
      code_challenge_method: "S256",
    });
  });

  it("when the callback has no state cookie, a different state or a forged cookie, then no session cookie is set", async () => {
    const start = await get("/login/start");
    const stateCookie = /^cgs_login=([^;]+)/.exec(start.headers.get("set-cookie") ?? "")![1]!;
    const state = new URL(start.headers.get("location")!).searchParams.get("state")!;
    const attempts: [string, Record<string, string>][] = [
      [`/login/callback?code=c&state=${state}`, {}],
      [`/login/callback?code=c&state=other`, { cookie: `cgs_login=${stateCookie}` }],
      [`/login/callback?code=c&state=${state}`, { cookie: `cgs_login=${stateCookie.slice(0, -2)}xx` }],
    ];
    for (const [path, headers] of attempts) {
      const res = await get(path, headers);
      expect(res.status).toBe(302);
      expect(res.headers.get("location")).toBe("/login?status=signin-failed");
      expect(res.headers.get("set-cookie") ?? "").not.toContain("cgs_session=");
    }
  });

  it("when /logout is posted from another origin, then the session cookie stays", async () => {
    const res = await fetch(`${gateway.url}/logout`, {
      method: "POST",
      headers: { origin: "https://evil.example.com" },
      redirect: "manual",
    });
    expect(res.status).toBe(303);
    expect(res.headers.get("set-cookie")).toBeNull();
    const same = await fetch(`${gateway.url}/logout`, {
      method: "POST",
      headers: { origin: "http://127.0.0.1:8080" },
      redirect: "manual",
    });
    expect(same.headers.get("set-cookie")).toMatch(
      /^cgs_session=; Max-Age=0; Path=\/; HttpOnly; SameSite=Lax/,
    );
  });
});

describe("auth method forwarded to accounts", () => {
  it("when a request authenticates by bearer or cookie, then accounts is told which, whatever the client claimed", async () => {
    const token = await idp.sign({ sub: "portal-user" });
    const accounts = gateway.upstreams.accounts;
    accounts.requests.length = 0;
    await get("/api/v1/session", { authorization: `Bearer ${token}`, "x-cgs-auth-method": "cookie" });
    await get("/api/v1/session", { cookie: `cgs_session=${token}` });
    expect(accounts.requests.map((r) => r.headers["x-cgs-auth-method"])).toEqual(["bearer", "cookie"]);
    const proxy = gateway.upstreams["auth-proxy"];
    proxy.requests.length = 0;
    await fetch(`${gateway.url}/api/v1/auth/password-reset/request`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-cgs-auth-method": "cookie" },
      body: JSON.stringify({ email: "a@example.com" }),
    });
    expect(proxy.requests[0]?.headers["x-cgs-auth-method"]).toBeUndefined();
  });
});
