import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import helmet from "helmet";
import type { RequestHandler } from "express";

/**
 * Helmet with a CSP strict enough for the portal pages the gateway will serve: same-origin scripts,
 * styles, XHR and forms only; no framing; no plugins.
 */
export function securityHeaders(publicBaseUrl: string): RequestHandler {
  // The headers never vary by request, so helmet runs once at start-up and each request only copies them.
  return headerSetter(helmetHeaders(publicBaseUrl));
}

/**
 * The headers for the API's answers (JSON, read by the SDK, the CLI and the portal's scripts, never rendered as a
 * page): the OWASP REST Security Cheat Sheet's set. No framing (frame-ancestors and X-Frame-Options), no MIME
 * sniffing, HTTPS only; a policy that loads nothing if an answer is ever opened as a document; and
 * Cross-Origin-Resource-Policy, so another site cannot pull a player's answers into its page with the player's
 * cookie. Helmet's other headers govern what a page may load and do (scripts, DNS prefetch, cross-origin windows,
 * downloads), which a JSON answer never does: they cost each answer about 470 bytes and seven header writes.
 */
export function apiSecurityHeaders(publicBaseUrl: string): RequestHandler {
  return headerSetter({
    "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
    "Cross-Origin-Resource-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    ...(publicBaseUrl.startsWith("https://")
      ? { "Strict-Transport-Security": "max-age=31536000; includeSubDomains" }
      : {}),
  });
}

/**
 * Sets the same headers on every response. Names are lower-cased once here: node lower-cases every name it is
 * given (a new string a header a request otherwise), and header names are case-insensitive (RFC 9110 §5.1).
 */
function headerSetter(set: OutgoingHttpHeaders): RequestHandler {
  const headers = Object.entries(set).map(([name, value]) => [name.toLowerCase(), value] as const);
  return (_req, res, next) => {
    for (const [name, value] of headers) res.setHeader(name, value!);
    next();
  };
}

/** The headers helmet sets, recorded from one run against a stand-in response (X-Powered-By is off app-wide). */
function helmetHeaders(publicBaseUrl: string): OutgoingHttpHeaders {
  const https = publicBaseUrl.startsWith("https://");
  const middleware = helmet({
    contentSecurityPolicy: {
      useDefaults: false,
      directives: {
        defaultSrc: ["'self'"],
        scriptSrc: ["'self'"],
        styleSrc: ["'self'"],
        imgSrc: ["'self'", "data:"],
        fontSrc: ["'self'"],
        connectSrc: ["'self'"],
        formAction: ["'self'"],
        frameAncestors: ["'none'"],
        baseUri: ["'self'"],
        objectSrc: ["'none'"],
        ...(https ? { upgradeInsecureRequests: [] } : {}),
      },
    },
    strictTransportSecurity: https ? { maxAge: 31_536_000, includeSubDomains: true } : false,
    referrerPolicy: { policy: "same-origin" },
    crossOriginResourcePolicy: { policy: "same-origin" },
  });
  const set: OutgoingHttpHeaders = {};
  const recorder = {
    setHeader: (name: string, value: string | number | readonly string[]) => {
      set[name] = value as string;
    },
    removeHeader: () => undefined,
  } as unknown as ServerResponse;
  middleware({} as IncomingMessage, recorder, () => undefined);
  return set;
}

/**
 * The pages' policy with more origins its scripts may fetch from (connect-src), for the pages that need them: the
 * Play page measures each region's latency beacon, which lives on the region's own origin.
 */
export function widenConnectSrc(policy: string, origins: readonly string[]): string {
  if (origins.length === 0) return policy;
  return policy.replace(/connect-src ([^;]*)/, (_all, sources: string) => {
    const kept = sources.split(" ").filter(Boolean);
    return `connect-src ${[...kept, ...origins.filter((o) => !kept.includes(o))].join(" ")}`;
  });
}
