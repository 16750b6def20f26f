export interface CookieAttributes {
  maxAgeSeconds: number;
  path: string;
  secure: boolean;
  sameSite?: "Lax" | "Strict";
}

/** A Set-Cookie value; every portal cookie is HttpOnly (page scripts never read credentials). */
export function portalCookie(name: string, value: string, attrs: CookieAttributes): string {
  return [
    `${name}=${value}`,
    `Max-Age=${Math.max(0, Math.floor(attrs.maxAgeSeconds))}`,
    `Path=${attrs.path}`,
    "HttpOnly",
    `SameSite=${attrs.sameSite ?? "Lax"}`,
    ...(attrs.secure ? ["Secure"] : []),
  ].join("; ");
}

/**
 * Secure unless the public origin is plain-HTTP loopback (local development): browsers refuse Secure
 * cookies over http, and loopback traffic never leaves the machine.
 */
export function refreshCookieSecure(publicBaseUrl: string): boolean {
  const url = new URL(publicBaseUrl);
  if (url.protocol !== "http:") return true;
  return !["127.0.0.1", "localhost", "[::1]"].includes(url.hostname);
}
