import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import helmet from "helmet";
import type { RequestHandler } from "express";

/**
 * Helmet with a CSP strict enough for the portal pages the gateway will serve: same-origin scripts,
 * styles, XHR and forms only; no framing; no plugins.
 */
export function securityHeaders(publicBaseUrl: string): RequestHandler {
  // The headers never vary by request, so helmet runs once at start-up and each request only copies them. Names
  // are lower-cased once here: node lower-cases every name it is given (a new string a header a request otherwise),
  // and header names are case-insensitive (RFC 9110 §5.1).
  const headers = Object.entries(helmetHeaders(publicBaseUrl)).map(
    ([name, value]) => [name.toLowerCase(), value] as const,
  );
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
