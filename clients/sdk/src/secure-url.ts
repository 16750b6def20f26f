/** Loopback hosts, where plain HTTP never leaves the machine (local development, `npm start`). */
function isLoopback(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, "").toLowerCase();
  return (
    host === "localhost" || host.endsWith(".localhost") || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host)
  );
}

/**
 * The URL, if tokens may be sent to it: https anywhere, plain http only to loopback (127.0.0.0/8, ::1,
 * localhost). Anything else throws a TypeError naming `what` and the URL: a bearer or refresh token sent over
 * plain HTTP to another machine can be read on the way.
 */
export function assertSecureUrl(url: string, what: string): URL {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new TypeError(`${what} is not a URL: ${url}`);
  }
  if (parsed.protocol === "https:") return parsed;
  if (parsed.protocol === "http:" && isLoopback(parsed.hostname)) return parsed;
  if (parsed.protocol === "http:") {
    throw new TypeError(
      `${what} ${url} uses plain http: tokens would cross the network unencrypted. Use https (plain http is accepted only for loopback: 127.0.0.1, ::1, localhost)`,
    );
  }
  throw new TypeError(`${what} ${url} must be an https URL`);
}

/** scheme://host[:port] of a URL, the unit a token is bound to. */
export const originOf = (url: string): string => new URL(url).origin;
