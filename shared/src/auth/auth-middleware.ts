import type { Request, RequestHandler, Response } from "express";
import { AppError } from "../errors";
import type { JwtVerifier, Principal } from "./jwt-verifier";

export type CredentialSource = "bearer" | "cookie";

/** What requireAuth leaves in res.locals. */
export interface AuthLocals {
  principal: Principal;
  /** The verified raw token, so a proxy can forward it as a bearer. */
  accessToken: string;
  credentialSource: CredentialSource;
}

export interface RequireAuthOptions {
  /** Also accept the token from this cookie (the gateway's browser session); services leave it unset. */
  cookieName?: string;
  /**
   * Origin (scheme://host[:port]) that cookie-authenticated writes must come from. A write carrying only
   * the cookie whose Origin/Referer does not match is treated as unauthenticated (401), so a cross-site
   * form or fetch cannot ride the browser's cookie. Required when cookieName is set.
   */
  allowedOrigin?: string;
}

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

export function readCookie(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq === -1) continue;
    if (part.slice(0, eq).trim() !== name) continue;
    let value = part.slice(eq + 1).trim();
    if (value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
    try {
      return decodeURIComponent(value);
    } catch {
      return value;
    }
  }
  return undefined;
}

function originOf(value: string | undefined): string | undefined {
  if (!value) return undefined;
  try {
    const origin = new URL(value).origin;
    return origin === "null" ? undefined : origin;
  } catch {
    return undefined;
  }
}

/** Same-origin check for cookie-authenticated writes: Origin, else Referer, must equal allowedOrigin. */
export function isSameOriginRequest(req: Request, allowedOrigin: string): boolean {
  const expected = originOf(allowedOrigin);
  if (!expected) return false;
  const origin = req.headers.origin;
  if (origin !== undefined) return originOf(origin) === expected;
  return originOf(req.headers.referer) === expected;
}

/** Extracts the credential: the Authorization bearer, or (when configured) the session cookie. */
export function extractToken(
  req: Request,
  options: RequireAuthOptions = {},
): { token: string; source: CredentialSource } | undefined {
  const header = req.headers.authorization;
  if (header !== undefined) {
    const match = /^Bearer[ ]+([A-Za-z0-9\-_.~+/]+=*)\s*$/i.exec(header);
    return match ? { token: match[1]!, source: "bearer" } : undefined;
  }
  if (!options.cookieName) return undefined;
  const cookie = readCookie(req.headers.cookie, options.cookieName);
  if (!cookie) return undefined;
  if (
    !SAFE_METHODS.has(req.method) &&
    !(options.allowedOrigin && isSameOriginRequest(req, options.allowedOrigin))
  ) {
    return undefined;
  }
  return { token: cookie, source: "cookie" };
}

/** True for the verifier's 503: the identity provider is down, so the token could not be judged (never a 401). */
export function isIdentityOutage(err: unknown): err is AppError {
  return err instanceof AppError && err.code === "UNAVAILABLE";
}

/**
 * Verifies the caller's JWT and sets res.locals.principal / accessToken / credentialSource; a bad token is 401,
 * an identity-provider outage 503 (a 401 would make clients sign the user out).
 */
export function requireAuth(verifier: JwtVerifier, options: RequireAuthOptions = {}): RequestHandler {
  return async (req, res, next) => {
    const credential = extractToken(req, options);
    if (!credential) {
      next(AppError.unauthenticated());
      return;
    }
    try {
      const principal = await verifier.verify(credential.token);
      const locals = res.locals as Partial<AuthLocals>;
      locals.principal = principal;
      locals.accessToken = credential.token;
      locals.credentialSource = credential.source;
      next();
    } catch (err) {
      next(isIdentityOutage(err) ? err : AppError.unauthenticated());
    }
  };
}

/** The principal requireAuth stored; throws 401 when the route was mounted without requireAuth. */
export function getPrincipal(res: Response): Principal {
  const principal = (res.locals as Partial<AuthLocals>).principal;
  if (!principal) throw AppError.unauthenticated();
  return principal;
}

export function getAuth(res: Response): AuthLocals {
  const locals = res.locals as Partial<AuthLocals>;
  if (!locals.principal || !locals.accessToken || !locals.credentialSource) throw AppError.unauthenticated();
  return locals as AuthLocals;
}
