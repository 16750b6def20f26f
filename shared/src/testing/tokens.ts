import http from "node:http";
import type { AddressInfo } from "node:net";
import { randomUUID } from "node:crypto";
import {
  exportJWK,
  exportSPKI,
  generateKeyPair,
  SignJWT,
  type JWK,
  type JWTPayload,
  type KeyLike,
  type JWTHeaderParameters,
} from "jose";
import { createJwtVerifier, type JwtVerifier } from "../auth";

interface SigningKey {
  kid: string;
  privateKey: KeyLike;
  publicKey: KeyLike;
  publicJwk: JWK;
}

export interface TestIdentityProviderOptions {
  /** Audience tokens carry by default. Default "cgs-api". */
  audience?: string;
  /** Realm name in the issuer path. Default "cgs-test". */
  realm?: string;
}

export interface TestSignOptions {
  /** Extra or overriding protected-header fields (e.g. {kid: "unknown"}). */
  header?: Partial<JWTHeaderParameters> & Record<string, unknown>;
  /** Sign with this key id instead of the current one (must be a key the provider generated). */
  kid?: string;
}

/** Claims to put in the token. Defaults: iss, aud, azp "cgs-test", typ "Bearer", sub "test-user", iat now, exp now+1h. A key set to undefined is removed. */
export type TestClaims = { [claim: string]: unknown } & Partial<Record<keyof JWTPayload, unknown>>;

export interface TestIdentityProvider {
  issuer: string;
  audience: string;
  jwksUrl: string;
  /** Key id of the key sign() uses by default. */
  readonly currentKid: string;
  /** How many times the JWKS endpoint has been fetched. */
  readonly jwksRequests: number;
  sign(claims?: TestClaims, options?: TestSignOptions): Promise<string>;
  /** New current key. keepPrevious (default true) keeps older keys published, as an IdP does during rotation. */
  rotate(options?: { keepPrevious?: boolean }): Promise<string>;
  /** Stops publishing a key (its tokens then fail verification once the JWKS is refetched). */
  unpublish(kid: string): void;
  /** A token signed with a fresh key that is never published. */
  signWithUnpublishedKey(claims?: TestClaims): Promise<string>;
  /** An unsecured JWT (`alg: none`). */
  unsecuredToken(claims?: TestClaims): string;
  /** The key-confusion attack: HS256 with the current public key's PEM as the HMAC secret. */
  hs256WithPublicKey(claims?: TestClaims): Promise<string>;
  publicKeyPem(kid?: string): Promise<string>;
  close(): Promise<void>;
}

/** The local realm's password-grant client every test token comes from; never allowed in production. */
export const TEST_CLIENT_ID = "cgs-test";
/** The allowed clients (azp) of a test verifier: the platform's clients plus the test client. */
export const TEST_ALLOWED_AZP = ["cgs-portal", "cgs-cli", TEST_CLIENT_ID];
/** TEST_ALLOWED_AZP as the OIDC_ALLOWED_AZP variable. */
export const TEST_ALLOWED_AZP_ENV = TEST_ALLOWED_AZP.join(",");

const b64url = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString("base64url");

/** Flips one character of the payload so the signature no longer matches. */
export function tamperToken(token: string): string {
  const [header, payload, signature] = token.split(".");
  const claims = JSON.parse(Buffer.from(payload ?? "", "base64url").toString("utf8")) as Record<
    string,
    unknown
  >;
  claims.sub = `${String(claims.sub ?? "")}-admin`;
  return `${header}.${b64url(claims)}.${signature}`;
}

async function newKey(): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair("RS256", { extractable: true });
  const kid = randomUUID();
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg: "RS256", use: "sig" };
  return { kid, privateKey, publicKey, publicJwk };
}

/**
 * A real identity provider stand-in for tests: an HTTP server on 127.0.0.1:<random> publishing a JWKS at
 * `<issuer>/protocol/openid-connect/certs` (Keycloak's layout), with RS256 keys that can be rotated.
 */
export async function startTestIdentityProvider(
  options: TestIdentityProviderOptions = {},
): Promise<TestIdentityProvider> {
  const audience = options.audience ?? "cgs-api";
  const realm = options.realm ?? "cgs-test";
  const keys = new Map<string, SigningKey>();
  const published = new Set<string>();
  let current = await newKey();
  keys.set(current.kid, current);
  published.add(current.kid);
  let jwksRequests = 0;

  const server = http.createServer((req, res) => {
    const path = (req.url ?? "").split("?")[0];
    if (path === `/realms/${realm}/protocol/openid-connect/certs`) {
      jwksRequests += 1;
      const body = JSON.stringify({ keys: [...published].map((kid) => keys.get(kid)!.publicJwk) });
      res.writeHead(200, { "Content-Type": "application/json", "Cache-Control": "no-store" });
      res.end(body);
      return;
    }
    if (path === `/realms/${realm}/.well-known/openid-configuration`) {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(
        JSON.stringify({
          issuer,
          jwks_uri: jwksUrl,
          authorization_endpoint: `${issuer}/protocol/openid-connect/auth`,
          token_endpoint: `${issuer}/protocol/openid-connect/token`,
        }),
      );
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const issuer = `http://127.0.0.1:${port}/realms/${realm}`;
  const jwksUrl = `${issuer}/protocol/openid-connect/certs`;

  const payloadFor = (claims: TestClaims = {}): JWTPayload => {
    const now = Math.floor(Date.now() / 1000);
    const merged: Record<string, unknown> = {
      iss: issuer,
      aud: audience,
      azp: TEST_CLIENT_ID,
      typ: "Bearer",
      sub: "test-user",
      iat: now,
      exp: now + 3600,
      ...claims,
    };
    for (const k of Object.keys(merged)) if (merged[k] === undefined) delete merged[k];
    return merged as JWTPayload;
  };

  const signWithKey = (
    key: SigningKey,
    claims?: TestClaims,
    header: Record<string, unknown> = {},
  ): Promise<string> =>
    new SignJWT(payloadFor(claims))
      .setProtectedHeader({ alg: "RS256", typ: "JWT", kid: key.kid, ...header } as JWTHeaderParameters)
      .sign(key.privateKey);

  return {
    issuer,
    audience,
    jwksUrl,
    get currentKid() {
      return current.kid;
    },
    get jwksRequests() {
      return jwksRequests;
    },
    sign(claims, signOptions = {}) {
      const key = signOptions.kid ? keys.get(signOptions.kid) : current;
      if (!key) throw new Error(`unknown test key ${signOptions.kid}`);
      return signWithKey(key, claims, signOptions.header);
    },
    async rotate({ keepPrevious = true } = {}) {
      const next = await newKey();
      keys.set(next.kid, next);
      if (!keepPrevious) published.clear();
      published.add(next.kid);
      current = next;
      return next.kid;
    },
    unpublish(kid) {
      published.delete(kid);
    },
    async signWithUnpublishedKey(claims) {
      return signWithKey(await newKey(), claims);
    },
    unsecuredToken(claims) {
      return `${b64url({ alg: "none", typ: "JWT" })}.${b64url(payloadFor(claims))}.`;
    },
    async hs256WithPublicKey(claims) {
      const secret = new TextEncoder().encode(await exportSPKI(current.publicKey));
      return new SignJWT(payloadFor(claims))
        .setProtectedHeader({ alg: "HS256", typ: "JWT", kid: current.kid })
        .sign(secret);
    },
    async publicKeyPem(kid) {
      const key = kid ? keys.get(kid) : current;
      if (!key) throw new Error(`unknown test key ${kid}`);
      return exportSPKI(key.publicKey);
    },
    close() {
      return new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      });
    },
  };
}

/** The JWT verifier a service builds, pointed at the test identity provider. */
export function testVerifier(
  idp: Pick<TestIdentityProvider, "issuer" | "audience" | "jwksUrl">,
): JwtVerifier {
  return createJwtVerifier({
    issuer: idp.issuer,
    audience: idp.audience,
    jwksUrl: idp.jwksUrl,
    allowedAzp: TEST_ALLOWED_AZP,
  });
}
