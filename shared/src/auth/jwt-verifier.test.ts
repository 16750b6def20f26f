import http from "node:http";
import type { AddressInfo } from "node:net";
import express from "express";
import pino from "pino";
import { errorHandler } from "../errors";
import {
  startTestIdentityProvider,
  tamperToken,
  TEST_ALLOWED_AZP,
  type TestIdentityProvider,
} from "../testing/tokens";
import { createJwtVerifier, type JwtVerifier, type JwtVerifierOptions } from "./jwt-verifier";
import { getPrincipal, requireAuth } from "./auth-middleware";

let idp: TestIdentityProvider;
let verifier: JwtVerifier;

beforeAll(async () => {
  idp = await startTestIdentityProvider();
  verifier = createJwtVerifier({
    issuer: idp.issuer,
    audience: idp.audience,
    jwksUrl: idp.jwksUrl,
    allowedAzp: TEST_ALLOWED_AZP,
    clockToleranceSeconds: 5,
    jwksCooldownMs: 0,
  });
});
afterAll(() => idp.close());

const now = () => Math.floor(Date.now() / 1000);

/** A verifier of the test provider's tokens with its own verified-token cache. */
const verifierFor = (options: Partial<JwtVerifierOptions>): JwtVerifier =>
  createJwtVerifier({
    issuer: idp.issuer,
    audience: idp.audience,
    jwksUrl: idp.jwksUrl,
    allowedAzp: TEST_ALLOWED_AZP,
    ...options,
  });

describe("createJwtVerifier", () => {
  it("when the token is valid, then sub becomes identityUserId with email and expiry", async () => {
    const exp = now() + 600;
    const principal = await verifier.verify(await idp.sign({ sub: "user-1", email: "a@example.com", exp }));
    expect(principal).toMatchObject({ identityUserId: "user-1", email: "a@example.com" });
    expect(principal.expiresAt.getTime()).toBe(exp * 1000);
  });

  const rejected: [string, () => Promise<string>][] = [
    ["expired beyond the tolerance", () => idp.sign({ exp: now() - 10 })],
    ["not yet valid", () => idp.sign({ nbf: now() + 60 })],
    ["from another issuer", () => idp.sign({ iss: "https://evil.example.com" })],
    ["for another audience", () => idp.sign({ aud: "other-api" })],
    ["without sub", () => idp.sign({ sub: undefined })],
    ["without exp", () => idp.sign({ exp: undefined })],
    ["unsecured (alg none)", async () => idp.unsecuredToken()],
    ["HS256 signed with the public key", () => idp.hs256WithPublicKey()],
    ["signed by an unknown key", () => idp.signWithUnpublishedKey()],
    ["tampered", async () => tamperToken(await idp.sign())],
    ["garbage", async () => "not.a.jwt"],
    ["issued to another client (azp)", () => idp.sign({ azp: "some-other-app" })],
    ["without azp", () => idp.sign({ azp: undefined })],
    ["a refresh token (typ Refresh)", () => idp.sign({ typ: "Refresh" })],
    ["an ID token (typ ID)", () => idp.sign({ typ: "ID" })],
    ["without typ", () => idp.sign({ typ: undefined })],
  ];
  it.each(rejected)("when the token is %s, then verify rejects with UNAUTHENTICATED", async (_name, make) => {
    await expect(verifier.verify(await make())).rejects.toMatchObject({
      code: "UNAUTHENTICATED",
      status: 401,
      message: "Missing or invalid bearer token",
    });
  });

  it("when expired within the clock tolerance, then it is still accepted", async () => {
    await expect(verifier.verify(await idp.sign({ exp: now() - 2 }))).resolves.toMatchObject({
      identityUserId: "test-user",
    });
  });

  it("when the provider rotates its key, then tokens from the new key verify after a refetch", async () => {
    await verifier.verify(await idp.sign());
    const before = idp.jwksRequests;
    await idp.rotate({ keepPrevious: false });
    await expect(verifier.verify(await idp.sign({ sub: "rotated" }))).resolves.toMatchObject({
      identityUserId: "rotated",
    });
    expect(idp.jwksRequests).toBe(before + 1);
  });

  it("when a token was verified before, then it is accepted again (from the cache, without waiting) only until its exp", async () => {
    const strict = verifierFor({ clockToleranceSeconds: 0 });
    const token = await idp.sign({ sub: "short-lived", exp: now() + 2 });
    expect(strict.cached(token)).toBeUndefined();
    await expect(strict.verify(token)).resolves.toMatchObject({ identityUserId: "short-lived" });
    expect(strict.cached(token)).toMatchObject({ identityUserId: "short-lived" });
    await expect(strict.verify(token)).resolves.toMatchObject({ identityUserId: "short-lived" });
    await new Promise((resolve) => setTimeout(resolve, 3_100));
    expect(strict.cached(token)).toBeUndefined();
    await expect(strict.verify(token)).rejects.toMatchObject({ code: "UNAUTHENTICATED", status: 401 });
  });

  it("when the cache is full, then the oldest token is checked against the keys again and a recent one is still remembered", async () => {
    const small = verifierFor({ verifiedCacheSize: 2, jwksCooldownMs: 0 });
    const tokens = await Promise.all(["a", "b", "c"].map((sub) => idp.sign({ sub })));
    for (const t of tokens) await small.verify(t);
    // The provider drops the key "a" and "c" were signed with; a token from its new key makes the verifier
    // refetch, so from here on only a remembered token passes (and "b" is pushed out by "new").
    await idp.rotate({ keepPrevious: false });
    await expect(small.verify(await idp.sign({ sub: "new" }))).resolves.toMatchObject({
      identityUserId: "new",
    });
    await expect(small.verify(tokens[2]!)).resolves.toMatchObject({ identityUserId: "c" });
    await expect(small.verify(tokens[0]!)).rejects.toMatchObject({ status: 401 });
  });
});

describe("createJwtVerifier with the production client list", () => {
  it("when a token comes from the local test client, then the default list refuses it and the portal's passes", async () => {
    const production = createJwtVerifier({
      issuer: idp.issuer,
      audience: idp.audience,
      jwksUrl: idp.jwksUrl,
    });
    await expect(production.verify(await idp.sign())).rejects.toMatchObject({ status: 401 });
    await expect(production.verify(await idp.sign({ azp: "cgs-portal" }))).resolves.toMatchObject({
      identityUserId: "test-user",
    });
  });
});

describe("createJwtVerifier while the identity provider is down", () => {
  // Each test has its own provider: closing it is the outage (connection refused on its port).
  it("when the JWKS cannot be fetched, then known keys keep verifying and an unknown kid answers 503, never 401", async () => {
    const own = await startTestIdentityProvider();
    const v = createJwtVerifier({
      issuer: own.issuer,
      audience: own.audience,
      jwksUrl: own.jwksUrl,
      allowedAzp: TEST_ALLOWED_AZP,
      jwksCooldownMs: 0,
      jwksCacheMaxAgeMs: 0,
      jwksTimeoutMs: 500,
    });
    const known = await own.sign({ sub: "known" });
    await v.verify(known);
    const rotatedKid = await own.rotate();
    const unknownKid = await own.sign({ sub: "new-key" }, { kid: rotatedKid });
    await own.close();

    const started = Date.now();
    await expect(v.verify(known)).resolves.toMatchObject({ identityUserId: "known" });
    await expect(v.verify(unknownKid)).rejects.toMatchObject({
      code: "UNAVAILABLE",
      status: 503,
      headers: { "Retry-After": "5" },
    });
    await expect(v.verify(tamperToken(known))).rejects.toMatchObject({ status: 401 });
    expect(Date.now() - started).toBeLessThan(3_000);
  });

  it("when the provider was never reached, then every token answers 503", async () => {
    const own = await startTestIdentityProvider();
    const token = await own.sign();
    await own.close();
    const v = createJwtVerifier({
      issuer: own.issuer,
      audience: own.audience,
      jwksUrl: own.jwksUrl,
      allowedAzp: TEST_ALLOWED_AZP,
      jwksTimeoutMs: 500,
    });
    await expect(v.verify(token)).rejects.toMatchObject({ code: "UNAVAILABLE", status: 503 });
  });

  it("when the JWKS hangs, then the fetch gives up within its timeout and answers 503", async () => {
    const hung = http.createServer(() => undefined);
    await new Promise<void>((r) => hung.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${(hung.address() as AddressInfo).port}/certs`;
    try {
      const v = createJwtVerifier({
        issuer: idp.issuer,
        audience: idp.audience,
        jwksUrl: url,
        allowedAzp: TEST_ALLOWED_AZP,
        jwksTimeoutMs: 300,
      });
      const started = Date.now();
      await expect(v.verify(await idp.sign())).rejects.toMatchObject({ status: 503 });
      expect(Date.now() - started).toBeLessThan(2_000);
    } finally {
      hung.closeAllConnections();
      await new Promise((r) => hung.close(r));
    }
  });
});

describe("requireAuth", () => {
  async function serve(
    options: Parameters<typeof requireAuth>[1],
  ): Promise<{ base: string; close: () => Promise<void> }> {
    const app = express();
    app.use(requireAuth(verifier, options));
    app.all("/me", (_req, res) => {
      res.json({ sub: getPrincipal(res).identityUserId, source: res.locals.credentialSource });
    });
    app.use(errorHandler({ logger: pino({ level: "silent" }) }));
    const server = http.createServer(app);
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    return {
      base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      close: () => new Promise((r) => server.close(() => r())),
    };
  }

  it("when the bearer is valid, then the principal is set; when missing or not a bearer, then 401 with the exact body", async () => {
    const { base, close } = await serve({});
    try {
      const ok = await fetch(`${base}/me`, {
        headers: { authorization: `Bearer ${await idp.sign({ sub: "u9" })}` },
      });
      expect(await ok.json()).toEqual({ sub: "u9", source: "bearer" });
      const attempts: Record<string, string>[] = [
        {},
        { authorization: "Basic dXNlcjpwYXNz" },
        { cookie: `cgs_session=${await idp.sign()}` },
      ];
      for (const headers of attempts) {
        const res = await fetch(`${base}/me`, { headers });
        expect(res.status).toBe(401);
        expect(await res.json()).toEqual({
          error: "UNAUTHENTICATED",
          message: "Missing or invalid bearer token",
        });
      }
    } finally {
      await close();
    }
  });

  it("when the cookie is used, then reads pass and writes pass only from the allowed origin", async () => {
    const { base, close } = await serve({
      cookieName: "cgs_session",
      allowedOrigin: "https://play.example.com",
    });
    try {
      const cookie = `theme=dark; cgs_session=${await idp.sign({ sub: "c1" })}`;
      expect(await (await fetch(`${base}/me`, { headers: { cookie } })).json()).toEqual({
        sub: "c1",
        source: "cookie",
      });
      const sameOrigin = await fetch(`${base}/me`, {
        method: "POST",
        headers: { cookie, origin: "https://play.example.com" },
      });
      expect(sameOrigin.status).toBe(200);
      const viaReferer = await fetch(`${base}/me`, {
        method: "POST",
        headers: { cookie, referer: "https://play.example.com/settings" },
      });
      expect(viaReferer.status).toBe(200);
      const foreign: Record<string, string>[] = [
        { origin: "https://evil.example.com" },
        {},
        { referer: "https://play.example.com.evil.net/" },
      ];
      for (const extra of foreign) {
        const res = await fetch(`${base}/me`, { method: "POST", headers: { cookie, ...extra } });
        expect(res.status).toBe(401);
      }
    } finally {
      await close();
    }
  });
});
