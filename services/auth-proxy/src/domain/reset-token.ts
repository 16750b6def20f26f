import { hkdfSync, randomUUID } from "node:crypto";
import { CompactEncrypt, SignJWT, compactDecrypt, errors, jwtVerify } from "jose";
import { AppError } from "@cgs/shared";

export interface ResetTokenClaims {
  identityUserId: string;
  jti: string;
  expiresAt: Date;
  /** When the password the link replaces was set: a later password change voids every older link. */
  passwordSetAt: number;
}

export interface ResetTokenCodec {
  issue(identityUserId: string, passwordSetAt: Date, now: Date): Promise<string>;
  /** Resolves the claims or throws RESET_TOKEN_EXPIRED / RESET_TOKEN_INVALID. */
  read(token: string, now: Date): Promise<ResetTokenClaims>;
}

const PURPOSE = "password-reset";
const ISSUER = "cgs-auth-proxy";

const deriveKey = (secret: string, info: string): Uint8Array =>
  new Uint8Array(hkdfSync("sha256", Buffer.from(secret, "utf8"), Buffer.alloc(0), info, 32));

const invalid = () => new AppError("RESET_TOKEN_INVALID", "The reset link is invalid or was already used");
const expired = () => new AppError("RESET_TOKEN_EXPIRED", "The reset link has expired; request a new one");

/**
 * Reset tokens are a JWT signed with HS256 and then encrypted as a JWE (dir, A256GCM), so the link is
 * opaque and any alteration fails decryption or the signature. Both keys derive from one secret (HKDF).
 */
export function createResetTokenCodec(secret: string, ttlSeconds: number): ResetTokenCodec {
  const signingKey = deriveKey(secret, "cgs reset-token signing");
  const encryptionKey = deriveKey(secret, "cgs reset-token encryption");

  return {
    async issue(identityUserId, passwordSetAt, now) {
      const iat = Math.floor(now.getTime() / 1000);
      const jwt = await new SignJWT({ purpose: PURPOSE, pwd_at: passwordSetAt.getTime() })
        .setProtectedHeader({ alg: "HS256", typ: "JWT" })
        .setSubject(identityUserId)
        .setIssuer(ISSUER)
        .setJti(randomUUID())
        .setIssuedAt(iat)
        .setExpirationTime(iat + ttlSeconds)
        .sign(signingKey);
      return new CompactEncrypt(new TextEncoder().encode(jwt))
        .setProtectedHeader({ alg: "dir", enc: "A256GCM", cty: "JWT" })
        .encrypt(encryptionKey);
    },

    async read(token, now) {
      let jwt: string;
      try {
        const { plaintext } = await compactDecrypt(token, encryptionKey, {
          keyManagementAlgorithms: ["dir"],
          contentEncryptionAlgorithms: ["A256GCM"],
        });
        jwt = new TextDecoder().decode(plaintext);
      } catch {
        throw invalid();
      }
      try {
        const { payload } = await jwtVerify(jwt, signingKey, {
          algorithms: ["HS256"],
          issuer: ISSUER,
          currentDate: now,
          clockTolerance: 0,
          requiredClaims: ["sub", "jti", "exp", "iat"],
        });
        if (
          payload.purpose !== PURPOSE ||
          typeof payload.sub !== "string" ||
          typeof payload.jti !== "string" ||
          typeof payload.pwd_at !== "number"
        ) {
          throw invalid();
        }
        return {
          identityUserId: payload.sub,
          jti: payload.jti,
          expiresAt: new Date((payload.exp ?? 0) * 1000),
          passwordSetAt: payload.pwd_at,
        };
      } catch (err) {
        if (err instanceof errors.JWTExpired) throw expired();
        throw invalid();
      }
    },
  };
}
