import type { JwtVerifier, Principal } from "@cgs/shared";

export interface VerifiedTokenCacheOptions {
  /** Tokens remembered at most; the oldest is forgotten first. */
  maxEntries?: number;
  /** A token is verified again after this long even when it expires later (a rotated-out key stops counting). */
  maxAgeMs?: number;
  now?: () => number;
}

/**
 * Remembers the principal of a token that verified, until the token's own expiry (and at most `maxAgeMs`): a
 * client polling every second would otherwise pay for a signature check per poll. Failures are never cached,
 * so a bad token or an identity-provider outage is judged afresh every time.
 */
export function withVerifiedTokenCache(
  verifier: JwtVerifier,
  { maxEntries = 10_000, maxAgeMs = 60_000, now = Date.now }: VerifiedTokenCacheOptions = {},
): JwtVerifier {
  const cache = new Map<string, { principal: Principal; until: number }>();
  return {
    async verify(token) {
      const hit = cache.get(token);
      if (hit) {
        if (now() < hit.until) return hit.principal;
        cache.delete(token);
      }
      const principal = await verifier.verify(token);
      if (cache.size >= maxEntries) cache.delete(cache.keys().next().value as string);
      cache.set(token, { principal, until: Math.min(principal.expiresAt.getTime(), now() + maxAgeMs) });
      return principal;
    },
  };
}
