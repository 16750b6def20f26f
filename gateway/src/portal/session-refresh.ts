import { createHash, hkdfSync } from "node:crypto";
import type { Request } from "express";
import { CompactEncrypt, compactDecrypt } from "jose";
import type { Logger } from "pino";
import { AppError, isSameOriginRequest, readCookie, type JwtVerifier, type Principal } from "@cgs/shared";
import { RefreshRejectedError, type OidcClient, type OidcTokens } from "./oidc-login";
import { portalCookie, refreshCookieSecure } from "./portal-cookies";
import {
  IN_FLIGHT_GRACE_MS,
  localRefreshCoordinator,
  mayShare,
  RefreshReplayRefused,
  type RefreshCoordinator,
} from "./refresh-coordinator";

export const REFRESH_COOKIE = "cgs_refresh";
/** Used when the provider does not say how long its refresh token lives: the spec's idle session lifetime. */
const DEFAULT_REFRESH_LIFETIME_SECONDS = 30 * 24 * 3600;
const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

interface RefreshCookiePayload {
  rt: string;
  /** Epoch seconds after which the cookie is refused, whatever the browser's jar did with Max-Age. */
  exp: number;
}

/** A 256-bit key for the refresh cookie only, derived so the login-state HMAC key is never reused as is. */
function refreshCookieKey(secret: string): Uint8Array {
  return new Uint8Array(hkdfSync("sha256", secret, "cgs-portal", "cgs_refresh cookie A256GCM", 32));
}

/** JWE (dir, A256GCM): the refresh token is unreadable and tamper-evident even if the cookie is logged. */
export async function sealRefreshToken(
  refreshToken: string,
  lifetimeSeconds: number,
  secret: string,
  now = Date.now(),
): Promise<string> {
  const payload: RefreshCookiePayload = { rt: refreshToken, exp: Math.floor(now / 1000) + lifetimeSeconds };
  return new CompactEncrypt(new TextEncoder().encode(JSON.stringify(payload)))
    .setProtectedHeader({ alg: "dir", enc: "A256GCM" })
    .encrypt(refreshCookieKey(secret));
}

/** The refresh token inside a cookie this gateway sealed, or null (absent, tampered, other key, expired). */
export async function openRefreshToken(
  value: string | undefined,
  secret: string,
  now = Date.now(),
): Promise<string | null> {
  if (!value) return null;
  try {
    const { plaintext } = await compactDecrypt(value, refreshCookieKey(secret), {
      keyManagementAlgorithms: ["dir"],
      contentEncryptionAlgorithms: ["A256GCM"],
    });
    const payload = JSON.parse(new TextDecoder().decode(plaintext)) as Partial<RefreshCookiePayload>;
    if (typeof payload.rt !== "string" || typeof payload.exp !== "number") return null;
    if (payload.exp * 1000 <= now) return null;
    return payload.rt;
  } catch {
    return null;
  }
}

export type BrowserRefreshOutcome =
  /** No refresh cookie, or cookies may not be used for this request: answer as without a session. */
  | { kind: "none" }
  | { kind: "refreshed"; accessToken: string; principal: Principal; setCookies: string[] }
  /** Tampered cookie or the provider refused the token: clear both cookies, answer 401. */
  | { kind: "signed-out"; setCookies: string[] }
  /**
   * A refresh cookie already rotated, from another client or past the in-flight grace: answer 401 and leave the
   * cookies alone (the browser that refreshed holds the new ones; clearing could only hurt it).
   */
  | { kind: "replayed" }
  /** The provider could not be reached: keep the cookies (an outage must not sign everyone out), answer 503. */
  | { kind: "unavailable" };

type SharedRefresh =
  | {
      kind: "refreshed";
      accessToken: string;
      principal: Principal;
      setCookies: string[];
      /** Who refreshed and when: the new tokens go to that client's requests in flight only (mayShare). */
      client: string;
      finishedAt: number;
    }
  | { kind: "rejected" }
  | { kind: "replayed" }
  | { kind: "unavailable" };

/**
 * The browser behind a request, as far as a server can tell without a cookie: its address (the load balancer's
 * X-Forwarded-For under TRUST_PROXY) and its user agent, hashed.
 */
function clientOf(req: Request): string {
  return createHash("sha256")
    .update(`${req.ip ?? req.socket.remoteAddress ?? ""}\n${req.headers["user-agent"] ?? ""}`)
    .digest("base64url");
}

export interface BrowserSessionOptions {
  publicBaseUrl: string;
  sessionCookieName: string;
  cookieSecret: string;
  oidc: OidcClient;
  verifier: JwtVerifier;
  logger: Logger;
  /** Shares one token-endpoint call per refresh token across gateway replicas; defaults to this process only. */
  coordinator?: RefreshCoordinator;
}

export interface BrowserSessions {
  /** Set-Cookie values for a fresh token set (sign-in callback and refresh). */
  cookiesFor(tokens: OidcTokens, accessExpiresAt: Date): Promise<string[]>;
  /** Set-Cookie values deleting both session cookies. */
  clearCookies(): string[];
  /** For a request whose access cookie is missing or no longer valid: refresh it from the refresh cookie. */
  refresh(req: Request): Promise<BrowserRefreshOutcome>;
  /** The refresh token in the request's cookie, if any (logout revokes it). */
  refreshTokenOf(req: Request): Promise<string | null>;
}

/**
 * The browser's session: a short-lived access token in the session cookie and the identity provider's
 * refresh token, encrypted, in cgs_refresh. Refreshes are single-flight per refresh token in this process and,
 * through the coordinator, across replicas: concurrent requests from one browser share one token-endpoint call
 * and set the same cookies (refresh tokens rotate, so a second call with the old one would sign the browser out).
 * The sharing is for that browser's requests in flight only: the same rotated cookie from another client, or
 * after IN_FLIGHT_GRACE_MS, is refused without a token-endpoint call.
 */
export function createBrowserSessions(options: BrowserSessionOptions): BrowserSessions {
  const sessionSecure = options.publicBaseUrl.startsWith("https://");
  const refreshSecure = refreshCookieSecure(options.publicBaseUrl);
  const inFlight = new Map<string, { client: string; flight: Promise<SharedRefresh> }>();
  const coordinator = options.coordinator ?? localRefreshCoordinator;

  const clearCookies = () => [
    portalCookie(options.sessionCookieName, "", { maxAgeSeconds: 0, path: "/", secure: sessionSecure }),
    portalCookie(REFRESH_COOKIE, "", {
      maxAgeSeconds: 0,
      path: "/",
      secure: refreshSecure,
      sameSite: "Strict",
    }),
  ];

  const cookiesFor = async (tokens: OidcTokens, accessExpiresAt: Date): Promise<string[]> => {
    const cookies = [
      portalCookie(options.sessionCookieName, tokens.accessToken, {
        maxAgeSeconds: (accessExpiresAt.getTime() - Date.now()) / 1000,
        path: "/",
        secure: sessionSecure,
      }),
    ];
    if (tokens.refreshToken) {
      const lifetime =
        tokens.refreshExpiresIn && tokens.refreshExpiresIn > 0
          ? tokens.refreshExpiresIn
          : DEFAULT_REFRESH_LIFETIME_SECONDS;
      cookies.push(
        portalCookie(
          REFRESH_COOKIE,
          await sealRefreshToken(tokens.refreshToken, lifetime, options.cookieSecret),
          {
            maxAgeSeconds: lifetime,
            path: "/",
            secure: refreshSecure,
            sameSite: "Strict",
          },
        ),
      );
    }
    return cookies;
  };

  const runRefresh = async (refreshToken: string, client: string): Promise<SharedRefresh> => {
    let tokens: OidcTokens;
    try {
      tokens = await coordinator.run(refreshToken, client, () => options.oidc.refresh(refreshToken));
    } catch (err) {
      if (err instanceof RefreshReplayRefused) return { kind: "replayed" };
      if (err instanceof RefreshRejectedError) {
        options.logger.info({ reason: err.message }, "browser session refresh refused");
        return { kind: "rejected" };
      }
      options.logger.warn({ err }, "browser session refresh could not reach the identity provider");
      return { kind: "unavailable" };
    }
    try {
      const principal = await options.verifier.verify(tokens.accessToken);
      const setCookies = await cookiesFor(tokens, principal.expiresAt);
      return {
        kind: "refreshed",
        accessToken: tokens.accessToken,
        principal,
        setCookies,
        client,
        finishedAt: Date.now(),
      };
    } catch (err) {
      // The new token is fine but its key cannot be fetched: an outage, not a reason to sign the browser out.
      if (err instanceof AppError && err.code === "UNAVAILABLE") return { kind: "unavailable" };
      options.logger.warn({ err }, "refreshed access token failed verification");
      return { kind: "rejected" };
    }
  };

  /**
   * One token-endpoint call per refresh token in this process. Its new tokens go to the requests the same browser
   * had in flight (mayShare); anyone else presenting the rotated cookie gets "replayed", never the tokens.
   */
  const sharedRefresh = async (refreshToken: string, client: string): Promise<SharedRefresh> => {
    let entry = inFlight.get(refreshToken);
    if (!entry) {
      const started = { client, flight: runRefresh(refreshToken, client) };
      entry = started;
      inFlight.set(refreshToken, started);
      void started.flight.then((result) => {
        // A refusal answers its own client only: the next request asks the coordinator for itself.
        if (result.kind === "unavailable" || result.kind === "replayed") {
          if (inFlight.get(refreshToken) === started) inFlight.delete(refreshToken);
          return;
        }
        setTimeout(() => {
          if (inFlight.get(refreshToken) === started) inFlight.delete(refreshToken);
        }, IN_FLIGHT_GRACE_MS).unref();
      });
    }
    const result = await entry.flight;
    if (result.kind === "replayed" && entry.client !== client) return sharedRefresh(refreshToken, client);
    if (result.kind === "refreshed" && !mayShare(result, client)) {
      options.logger.warn("a rotated refresh cookie came from another client or too late; refused");
      return { kind: "replayed" };
    }
    return result;
  };

  const refreshTokenOf = (req: Request) =>
    openRefreshToken(readCookie(req.headers.cookie, REFRESH_COOKIE), options.cookieSecret);

  return {
    cookiesFor,
    clearCookies,
    refreshTokenOf,
    async refresh(req) {
      // Same rules as the session cookie: never for bearer callers, never for writes from another origin.
      if (req.headers.authorization !== undefined) return { kind: "none" };
      if (!SAFE_METHODS.has(req.method) && !isSameOriginRequest(req, options.publicBaseUrl)) {
        return { kind: "none" };
      }
      const raw = readCookie(req.headers.cookie, REFRESH_COOKIE);
      if (!raw) return { kind: "none" };
      const refreshToken = await openRefreshToken(raw, options.cookieSecret);
      if (!refreshToken) return { kind: "signed-out", setCookies: clearCookies() };
      const result = await sharedRefresh(refreshToken, clientOf(req));
      if (result.kind === "rejected") return { kind: "signed-out", setCookies: clearCookies() };
      if (result.kind === "refreshed") {
        const { accessToken, principal, setCookies } = result;
        return { kind: "refreshed", accessToken, principal, setCookies };
      }
      return result;
    },
  };
}
