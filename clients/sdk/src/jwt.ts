export interface JwtClaims {
  exp?: number;
  azp?: string;
  iss?: string;
  sub?: string;
  email?: string;
  [claim: string]: unknown;
}

/** Reads a JWT's claims WITHOUT verifying it: only to know when it expires and which client it belongs to. */
export function decodeJwt(token: string): JwtClaims | undefined {
  const payload = token.split(".")[1];
  if (!payload) return undefined;
  try {
    const base64 = payload.replace(/-/g, "+").replace(/_/g, "/");
    const binary = atob(base64.padEnd(base64.length + ((4 - (base64.length % 4)) % 4), "="));
    const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
    const claims: unknown = JSON.parse(new TextDecoder().decode(bytes));
    return claims && typeof claims === "object" ? (claims as JwtClaims) : undefined;
  } catch {
    return undefined;
  }
}

/** True when the token's `exp` is within `skewSeconds` of now (tokens without `exp` never expire here). */
export function isExpired(token: string, skewSeconds = 30, now = Date.now()): boolean {
  const exp = decodeJwt(token)?.exp;
  return typeof exp === "number" && exp - skewSeconds <= now / 1000;
}
