import { createRemoteJWKSet, jwtVerify, type JWTPayload } from "jose";
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

export interface JwtVerifierOptions {
  issuer: string;
  audience: string;
  jwksUrl: string;
  clockToleranceSeconds?: number;
  /** Minimum time between refetches caused by an unknown kid (jose cooldown). Default 30 s. */
  jwksCooldownMs?: number;
  /** How long a fetched JWKS is trusted before a refetch. Default 10 min. */
  jwksCacheMaxAgeMs?: number;
  jwksTimeoutMs?: number;
}

export interface Principal {
  /** The token's `sub`: the identity provider's user id. */
  identityUserId: string;
  email?: string;
  expiresAt: Date;
  claims: JWTPayload;
}

export interface JwtVerifier {
  /** Resolves the principal or rejects with AppError UNAUTHENTICATED (401) for any failure. */
  verify(token: string): Promise<Principal>;
}

export function createJwtVerifier(options: JwtVerifierOptions): JwtVerifier {
  const jwks = createRemoteJWKSet(new URL(options.jwksUrl), {
    cooldownDuration: options.jwksCooldownMs ?? 30_000,
    cacheMaxAge: options.jwksCacheMaxAgeMs ?? 600_000,
    timeoutDuration: options.jwksTimeoutMs ?? 5_000,
  });
  return {
    async verify(token: string): Promise<Principal> {
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
        const principal: Principal = {
          identityUserId: payload.sub,
          expiresAt: new Date(payload.exp * 1000),
          claims: payload,
        };
        if (typeof payload.email === "string") principal.email = payload.email;
        return principal;
      } catch {
        throw AppError.unauthenticated();
      }
    },
  };
}
