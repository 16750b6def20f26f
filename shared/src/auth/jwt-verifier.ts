import {
  createLocalJWKSet,
  errors as joseErrors,
  jwtVerify,
  type JSONWebKeySet,
  type JWTHeaderParameters,
  type JWTPayload,
  type FlattenedJWSInput,
  type KeyLike,
} from "jose";
import { AppError } from "../errors";

/** Asymmetric only: a verifier that accepts HS* could be fooled with the public key as the HMAC secret. */
export const ALLOWED_JWT_ALGORITHMS = [
  "RS256",
  "RS384",
  "RS512",
  "PS256",
  "PS384",
  "PS512",
  "ES256",
  "ES384",
  "ES512",
  "EdDSA",
] as const;

/** The platform's own clients; a production verifier accepts access tokens issued to these only. */
export const PLATFORM_CLIENT_IDS = ["cgs-portal", "cgs-cli"] as const;

export interface JwtVerifierOptions {
  issuer: string;
  audience: string;
  jwksUrl: string;
  /** Clients (`azp`) whose access tokens are accepted. Default PLATFORM_CLIENT_IDS. */
  allowedAzp?: readonly string[];
  clockToleranceSeconds?: number;
  /** Minimum time between refetches caused by an unknown kid. Default 30 s. */
  jwksCooldownMs?: number;
  /** How long a fetched JWKS is trusted before a refetch; past it the last good set still serves while the IdP fails. Default 10 min. */
  jwksCacheMaxAgeMs?: number;
  jwksTimeoutMs?: number;
  /** Verified tokens remembered (so a repeated token skips the signature check); 0 turns the cache off. Default 10,000. */
  verifiedCacheSize?: number;
  /** Longest a verified token is remembered, never past its `exp`. Default 60 s. */
  verifiedCacheMaxAgeMs?: number;
}

export interface Principal {
  /** The token's `sub`: the identity provider's user id. */
  identityUserId: string;
  email?: string;
  expiresAt: Date;
  claims: JWTPayload;
}

export interface JwtVerifier {
  /**
   * Resolves the principal, or rejects with AppError UNAUTHENTICATED (401) for a bad token, or UNAVAILABLE
   * (503) when the token's key is unknown and the identity provider's JWKS cannot be fetched.
   */
  verify(token: string): Promise<Principal>;
  /**
   * The principal `verify` would resolve from its cache of tokens it already verified (still within their `exp`),
   * without waiting; undefined means: call `verify`. For a hot path that saves a promise per request.
   */
  cached(token: string): Principal | undefined;
}

class JwksUnavailable extends Error {}

type KeyResolver = (header: JWTHeaderParameters, token: FlattenedJWSInput) => Promise<KeyLike | Uint8Array>;

/**
 * A JWKS cache that keeps the last good key set (stale-while-error): an identity-provider outage must not
 * sign out users whose tokens were signed with a key we already know.
 */
function cachedJwks(url: string, cooldownMs: number, maxAgeMs: number, timeoutMs: number): KeyResolver {
  let keys: ReturnType<typeof createLocalJWKSet> | undefined;
  let fetchedAt = -Infinity;
  let lastAttempt = -Infinity;
  let lastFailed = false;
  let inflight: Promise<void> | undefined;

  const refresh = (): Promise<void> => {
    inflight ??= (async () => {
      lastAttempt = Date.now();
      try {
        const res = await fetch(url, {
          signal: AbortSignal.timeout(timeoutMs),
          headers: { accept: "application/json" },
        });
        if (!res.ok) throw new Error(`JWKS answered ${res.status}`);
        const body = (await res.json()) as JSONWebKeySet;
        if (!Array.isArray(body?.keys)) throw new Error("JWKS has no keys array");
        keys = createLocalJWKSet(body);
        fetchedAt = Date.now();
        lastFailed = false;
      } catch (err) {
        lastFailed = true;
        throw new JwksUnavailable(err instanceof Error ? err.message : String(err));
      } finally {
        inflight = undefined;
      }
    })();
    return inflight;
  };

  return async (header, token) => {
    const now = Date.now();
    if (!keys) {
      if (lastFailed && now - lastAttempt < cooldownMs) throw new JwksUnavailable("JWKS unreachable");
      await refresh();
    } else if (now - fetchedAt > maxAgeMs && now - lastAttempt >= cooldownMs) {
      // Stale-while-revalidate: this request uses the keys it has; a failed refresh keeps them (stale-while-error).
      void refresh().catch(() => undefined);
    }
    try {
      return await keys!(header, token);
    } catch (err) {
      if (!(err instanceof joseErrors.JWKSNoMatchingKey)) throw err;
      // An unknown kid may be a rotation: refetch; while the IdP fails we cannot tell a new key from a forged one.
      if (Date.now() - lastAttempt < cooldownMs) {
        if (lastFailed) throw new JwksUnavailable("JWKS unreachable");
        throw err;
      }
      await refresh();
      return keys!(header, token);
    }
  };
}

/**
 * Verified tokens by their exact text, oldest first (a Map keeps insertion order), so the oldest is evicted
 * when full. An entry never outlives its token's `exp` nor maxAgeMs; failures are never remembered.
 */
function verifiedTokenCache(size: number, maxAgeMs: number) {
  const entries = new Map<string, { principal: Principal; until: number }>();
  return {
    get(token: string): Principal | undefined {
      const hit = entries.get(token);
      if (!hit) return undefined;
      if (Date.now() < hit.until) return hit.principal;
      entries.delete(token);
      return undefined;
    },
    set(token: string, principal: Principal): void {
      if (size <= 0) return;
      const until = Math.min(principal.expiresAt.getTime(), Date.now() + maxAgeMs);
      if (until <= Date.now()) return;
      if (entries.size >= size) entries.delete(entries.keys().next().value!);
      entries.set(token, { principal, until });
    },
  };
}

export function createJwtVerifier(options: JwtVerifierOptions): JwtVerifier {
  const jwks = cachedJwks(
    options.jwksUrl,
    options.jwksCooldownMs ?? 30_000,
    options.jwksCacheMaxAgeMs ?? 600_000,
    options.jwksTimeoutMs ?? 5_000,
  );
  const allowedAzp = new Set(options.allowedAzp ?? PLATFORM_CLIENT_IDS);
  const verified = verifiedTokenCache(
    options.verifiedCacheSize ?? 10_000,
    options.verifiedCacheMaxAgeMs ?? 60_000,
  );
  return {
    cached: (token) => verified.get(token),
    async verify(token: string): Promise<Principal> {
      const cached = verified.get(token);
      if (cached) return cached;
      try {
        const { payload } = await jwtVerify(token, jwks, {
          issuer: options.issuer,
          audience: options.audience,
          algorithms: [...ALLOWED_JWT_ALGORITHMS],
          clockTolerance: options.clockToleranceSeconds ?? 30,
          requiredClaims: ["sub", "exp"],
        });
        if (typeof payload.sub !== "string" || payload.sub === "" || typeof payload.exp !== "number") {
          throw AppError.unauthenticated();
        }
        // Keycloak marks access tokens typ "Bearer" (ID and refresh tokens carry "ID" / "Refresh").
        if (payload.typ !== "Bearer") throw AppError.unauthenticated();
        if (typeof payload.azp !== "string" || !allowedAzp.has(payload.azp)) throw AppError.unauthenticated();
        const principal: Principal = {
          identityUserId: payload.sub,
          expiresAt: new Date(payload.exp * 1000),
          claims: payload,
        };
        if (typeof payload.email === "string") principal.email = payload.email;
        verified.set(token, principal);
        return principal;
      } catch (err) {
        if (err instanceof JwksUnavailable) {
          throw AppError.unavailable("The identity provider is unavailable; try again shortly", 5);
        }
        throw AppError.unauthenticated();
      }
    },
  };
}
