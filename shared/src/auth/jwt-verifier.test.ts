import http from "node:http";
import type { AddressInfo } from "node:net";
import express from "express";
import pino from "pino";
import { errorHandler } from "../errors";
import { startTestIdentityProvider, tamperToken, type TestIdentityProvider } from "../testing/tokens";
import { createJwtVerifier, type JwtVerifier } from "./jwt-verifier";
import { getPrincipal, requireAuth } from "./auth-middleware";

let idp: TestIdentityProvider;
let verifier: JwtVerifier;

beforeAll(async () => {
  idp = await startTestIdentityProvider();
  verifier = createJwtVerifier({
    issuer: idp.issuer,
    audience: idp.audience,
    jwksUrl: idp.jwksUrl,
    clockToleranceSeconds: 5,
    jwksCooldownMs: 0,
  });
});
afterAll(() => idp.close());

const now = () => Math.floor(Date.now() / 1000);

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
