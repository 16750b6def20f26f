import { Router, type Request, type RequestHandler, type Response } from "express";
import type { Logger } from "pino";
import {
  AppError,
  isSameOriginRequest,
  readCookie,
  type JwtVerifier,
  type OpenApiDocument,
  type Principal,
} from "@cgs/shared";
import { widenConnectSrc } from "../http/security-headers";
import { codeChallenge, newLoginState, openLoginState, sealLoginState, type OidcClient } from "./oidc-login";
import { loadClientScripts, portalAssets } from "./portal-assets";
import { portalCookie as cookie } from "./portal-cookies";
import type { BrowserSessions } from "./session-refresh";
import { forgotPasswordPage, loginPage, resetPasswordPage, type LoginBanner } from "./portal-pages";
import {
  accountPage,
  billingPage,
  devicesPage,
  homePage,
  settingsPage,
  tokensElsewherePage,
  tokensPage,
} from "./player-pages";
import { preferencesFields, topupBounds } from "./preferences-form";

export const LOGIN_STATE_COOKIE = "cgs_login";
const LOGIN_STATE_TTL_MS = 10 * 60_000;

export interface PortalOptions {
  /** Public origin, e.g. https://play.example.com; the callback is <origin>/login/callback. */
  publicBaseUrl: string;
  sessionCookieName: string;
  /** Signs the short-lived login-state cookie (state + PKCE verifier). */
  cookieSecret: string;
  oidc: OidcClient;
  verifier: JwtVerifier;
  /** Builds and clears the session + refresh cookies. */
  sessions: BrowserSessions;
  logger: Logger;
  /** Per-IP limiter for the routes that call the identity provider. */
  limit: RequestHandler;
  /** The API contract: the settings form and the top-up bounds are built from its schemas. */
  openapi: OpenApiDocument;
  /** Origins of the regions' latency beacons, which the signed-in pages' scripts may fetch (connect-src). */
  beaconOrigins?: readonly string[];
}

const BANNERS = new Set<LoginBanner>(["password-updated", "signin-failed", "signed-out"]);

function html(res: Response, body: string): void {
  res.setHeader("Cache-Control", "no-store");
  res.type("html").send(body);
}

/**
 * The portal pages on the gateway's origin: /login (OIDC authorization code + PKCE, ending in the
 * HttpOnly session cookie), /forgot-password, /reset-password, /logout, the signed-in pages (/, /billing,
 * /settings, /settings/tokens, /account), and their assets.
 */
export function portalRoutes(options: PortalOptions): Router {
  const router = Router();
  const secure = options.publicBaseUrl.startsWith("https://");
  const redirectUri = `${options.publicBaseUrl}/login/callback`;

  router.get("/portal/:asset", (req, res, next) => {
    const asset = portalAssets[req.params.asset];
    if (!asset) {
      next();
      return;
    }
    res.setHeader("Cache-Control", "public, max-age=300");
    res.type(asset.type).send(asset.body);
  });

  const clientScripts = loadClientScripts();
  if (clientScripts.size === 0) {
    options.logger.error("portal client scripts are missing: build the workspace (npx tsc -b)");
  }
  router.get("/portal/js/:file", (req, res, next) => {
    const script = clientScripts.get(req.params.file);
    if (script === undefined) {
      next();
      return;
    }
    res.setHeader("Cache-Control", "no-cache");
    res.type("text/javascript; charset=utf-8").send(script);
  });

  // Browsers ask for it on every page; answering 204 keeps their consoles (and the access log) quiet.
  router.get("/favicon.ico", (_req, res) => {
    res.setHeader("Cache-Control", "public, max-age=86400");
    res.status(204).end();
  });

  router.get("/login", (req, res) => {
    const status = typeof req.query.status === "string" ? (req.query.status as LoginBanner) : null;
    html(res, loginPage(status && BANNERS.has(status) ? status : null));
  });

  router.get("/login/start", options.limit, async (_req, res, next) => {
    try {
      const state = newLoginState(LOGIN_STATE_TTL_MS);
      const location = await options.oidc.authorizationUrl({
        state: state.state,
        challenge: codeChallenge(state.verifier),
        redirectUri,
      });
      res.setHeader(
        "Set-Cookie",
        cookie(LOGIN_STATE_COOKIE, sealLoginState(state, options.cookieSecret), {
          maxAgeSeconds: LOGIN_STATE_TTL_MS / 1000,
          path: "/login",
          secure,
        }),
      );
      res.setHeader("Cache-Control", "no-store");
      res.redirect(302, location);
    } catch (err) {
      options.logger.warn({ err }, "portal sign-in could not reach the identity provider");
      next(AppError.unavailable("The identity provider is unavailable; try again shortly", 5));
    }
  });

  router.get("/login/callback", options.limit, async (req, res) => {
    const clearState = cookie(LOGIN_STATE_COOKIE, "", { maxAgeSeconds: 0, path: "/login", secure });
    res.setHeader("Cache-Control", "no-store");
    const failed = (reason: string) => {
      options.logger.info({ reason }, "portal sign-in failed");
      res.setHeader("Set-Cookie", clearState);
      res.redirect(302, "/login?status=signin-failed");
    };
    const saved = openLoginState(readCookie(req.headers.cookie, LOGIN_STATE_COOKIE), options.cookieSecret);
    const { code, state } = req.query;
    if (!saved) return failed("missing or expired login state");
    if (typeof state !== "string" || state !== saved.state) return failed("state mismatch");
    if (typeof code !== "string" || code === "") return failed("no authorization code");
    try {
      const tokens = await options.oidc.exchangeCode({ code, verifier: saved.verifier, redirectUri });
      const principal = await options.verifier.verify(tokens.accessToken);
      res.setHeader("Set-Cookie", [
        clearState,
        ...(await options.sessions.cookiesFor(tokens, principal.expiresAt)),
      ]);
      res.redirect(302, "/");
    } catch (err) {
      failed(err instanceof Error ? err.message : "code exchange failed");
    }
  });

  router.post("/logout", async (req, res) => {
    res.setHeader("Cache-Control", "no-store");
    // A cross-site form must not sign the user out.
    if (!isSameOriginRequest(req, options.publicBaseUrl)) {
      res.redirect(303, "/account");
      return;
    }
    const refreshToken = await options.sessions.refreshTokenOf(req);
    if (refreshToken) {
      // Ends the identity provider's session (revoking the refresh token); best effort: the cookies go anyway.
      await options.oidc.logout(refreshToken).catch((err: unknown) => {
        options.logger.warn({ err }, "portal sign-out could not end the identity provider session");
      });
    }
    res.setHeader("Set-Cookie", options.sessions.clearCookies());
    res.redirect(303, "/login?status=signed-out");
  });

  router.get("/forgot-password", (_req, res) => html(res, forgotPasswordPage()));
  router.get("/reset-password", (_req, res) => html(res, resetPasswordPage()));

  /**
   * The signed-in pages: the access cookie, or a refresh from the refresh cookie (its Set-Cookie rides on
   * the page); without either the browser goes to /login.
   */
  const signedIn = async (
    req: Request,
    res: Response,
  ): Promise<{ token: string; principal: Principal } | null> => {
    const token = readCookie(req.headers.cookie, options.sessionCookieName);
    if (token) {
      const principal = await options.verifier.verify(token).catch((err: unknown) => {
        // An identity-provider outage is answered as such; only a bad or expired cookie falls to the refresh.
        if (err instanceof AppError && err.code === "UNAVAILABLE") throw err;
        return null;
      });
      if (principal) return { token, principal };
    }
    const refreshed = await options.sessions.refresh(req);
    if (refreshed.kind === "unavailable") {
      throw AppError.unavailable("The identity provider is unavailable; try again shortly", 5);
    }
    if (refreshed.kind === "none" || refreshed.kind === "replayed") return null;
    res.append("Set-Cookie", refreshed.setCookies);
    if (refreshed.kind !== "refreshed") return null;
    return { token: refreshed.accessToken, principal: refreshed.principal };
  };

  const page =
    (render: (req: Request, session: { token: string; principal: Principal }) => string): RequestHandler =>
    async (req, res, next) => {
      try {
        const session = await signedIn(req, res);
        res.setHeader("Cache-Control", "no-store");
        const policy = res.getHeader("content-security-policy");
        if (typeof policy === "string" && options.beaconOrigins?.length) {
          res.setHeader("content-security-policy", widenConnectSrc(policy, options.beaconOrigins));
        }
        if (!session) {
          res.redirect(302, "/login");
          return;
        }
        html(res, render(req, session));
      } catch (err) {
        next(err);
      }
    };

  const bounds = topupBounds(options.openapi);
  const fields = preferencesFields(options.openapi);
  router.get(
    "/",
    page(() => homePage()),
  );
  router.get(
    "/billing",
    page(() => billingPage(bounds)),
  );
  router.get(
    "/devices",
    page(() => devicesPage()),
  );
  router.get(
    "/settings",
    page(() => settingsPage(fields)),
  );
  // The access token is shown only to a same-origin navigation: a page on another site that links here
  // gets no token in a page it cannot read anyway, and nothing is cached (no-store).
  router.get(
    "/settings/tokens",
    page((req, session) =>
      req.headers["sec-fetch-site"] === "cross-site" || req.headers["sec-fetch-site"] === "same-site"
        ? tokensElsewherePage()
        : tokensPage(session.token, session.principal.expiresAt, options.publicBaseUrl),
    ),
  );
  router.get("/account", (req, res, next) => {
    // Checkout's return URLs point at /account; the top-up outcome belongs to the billing page.
    const topup = req.query.topup;
    if (topup === "success" || topup === "cancelled") {
      res.setHeader("Cache-Control", "no-store");
      res.redirect(302, `/billing?topup=${topup}`);
      return;
    }
    void page(() => accountPage())(req, res, next);
  });
  return router;
}
