import helmet from "helmet";
import type { RequestHandler } from "express";

/**
 * Helmet with a CSP strict enough for the portal pages the gateway will serve: same-origin scripts,
 * styles, XHR and forms only; no framing; no plugins.
 */
export function securityHeaders(publicBaseUrl: string): RequestHandler {
  const https = publicBaseUrl.startsWith("https://");
  return helmet({
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
}
