import type { NextFunction, Request, RequestHandler, Response } from "express";
import { AppError, extractToken, isIdentityOutage, type JwtVerifier } from "@cgs/shared";
import type { BrowserSessions } from "../portal/session-refresh";
import { routeOf, type GatewayLocals } from "./gateway-locals";
import type { RateLimiters } from "./rate-limit-middleware";
import type { RouteEntry } from "./route-table";

export interface AuthenticationOptions {
  verifier: JwtVerifier;
  /** The portal's access cookie, accepted like a bearer. */
  sessionCookieName: string;
  /** Writes may use the cookies only when their Origin (else Referer) is this origin. */
  publicBaseUrl: string;
  /** Refreshes a browser whose access cookie is missing or expired from its refresh cookie. */
  browserSessions: Pick<BrowserSessions, "refresh">;
  /** A failed attempt counts against the client address in the operation's bucket (`<bucket>:ip`). */
  limiters: Pick<RateLimiters, "forBucket">;
}

/**
 * Authentication for the /api/ chain (after the route lookup): public operations pass untouched; others need a
 * bearer header or the portal's session cookie (writes only from publicBaseUrl's origin). A browser whose access
 * cookie is missing or expired is refreshed from its refresh cookie under the same origin rule, and the new
 * cookies ride on the answer. Sets res.locals' principal, accessToken and credentialSource; fails with 401
 * UNAUTHENTICATED, or 503 UNAVAILABLE while the identity provider cannot judge the token. Failed attempts count
 * against the client address's bucket, so credential guessing is limited too.
 */
export function createAuthentication(options: AuthenticationOptions): RequestHandler {
  const { verifier, browserSessions } = options;
  const tokenOptions = { cookieName: options.sessionCookieName, allowedOrigin: options.publicBaseUrl };

  const verifyOrRefresh = async (
    req: Request,
    res: Response,
    next: NextFunction,
    route: RouteEntry,
    credential: ReturnType<typeof extractToken>,
  ): Promise<void> => {
    const locals = res.locals as GatewayLocals;
    try {
      if (credential) {
        // A bearer that fails is final; a failing access cookie falls through to the refresh cookie.
        const principal = await verifier.verify(credential.token).catch((err: unknown) => {
          if (credential.source !== "cookie" || isIdentityOutage(err)) throw err;
          return null;
        });
        if (principal) {
          locals.principal = principal;
          locals.accessToken = credential.token;
          locals.credentialSource = credential.source;
          next();
          return;
        }
      }
      const refreshed = await browserSessions.refresh(req);
      if (refreshed.kind === "unavailable") {
        next(AppError.unavailable("The identity provider is unavailable; try again shortly", 5));
        return;
      }
      if (refreshed.kind === "signed-out") res.append("Set-Cookie", refreshed.setCookies);
      if (refreshed.kind !== "refreshed") throw AppError.unauthenticated();
      res.append("Set-Cookie", refreshed.setCookies);
      locals.principal = refreshed.principal;
      locals.accessToken = refreshed.accessToken;
      locals.credentialSource = "cookie";
      next();
    } catch (err) {
      if (isIdentityOutage(err)) {
        next(err);
        return;
      }
      if (!route.rateLimit) {
        next(AppError.unauthenticated());
        return;
      }
      const ipLimiter = options.limiters.forBucket({ bucket: route.rateLimit.bucket, scope: "ip" });
      void ipLimiter(req, res, (err?: unknown) => next(err ?? AppError.unauthenticated()));
    }
  };

  return (req, res, next) => {
    const route = routeOf(res);
    if (route.public) {
      next();
      return;
    }
    const credential = extractToken(req, tokenOptions);
    // A token verified earlier (the usual case) is answered here, without a promise.
    const known = credential && verifier.cached(credential.token);
    if (known) {
      const locals = res.locals as GatewayLocals;
      locals.principal = known;
      locals.accessToken = credential.token;
      locals.credentialSource = credential.source;
      next();
      return;
    }
    return verifyOrRefresh(req, res, next, route, credential);
  };
}
