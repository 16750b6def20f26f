import { createJwtVerifier, type JwtVerifier } from "@cgs/shared";
import {
  startTestIdentityProvider,
  tamperToken,
  TEST_ALLOWED_AZP,
  type TestIdentityProvider,
} from "@cgs/shared/testing/tokens";
import { withVerifiedTokenCache } from "./verified-token-cache";

let idp: TestIdentityProvider;
let verifier: JwtVerifier;
let checks = 0;

beforeAll(async () => {
  idp = await startTestIdentityProvider();
  const real = createJwtVerifier({
    issuer: idp.issuer,
    audience: idp.audience,
    jwksUrl: idp.jwksUrl,
    allowedAzp: TEST_ALLOWED_AZP,
  });
  verifier = { verify: (token) => ((checks += 1), real.verify(token)) };
});
afterAll(() => idp.close());
beforeEach(() => (checks = 0));

describe("verified-token cache", () => {
  it("when a token is presented again, then its principal is served without another signature check", async () => {
    const cached = withVerifiedTokenCache(verifier);
    const token = await idp.sign({ sub: "repeat" });
    for (let i = 0; i < 5; i += 1) {
      await expect(cached.verify(token)).resolves.toMatchObject({ identityUserId: "repeat" });
    }
    expect(checks).toBe(1);
  });

  it("when the token's expiry has passed, then it is checked again rather than served from the cache", async () => {
    let now = Date.now();
    const cached = withVerifiedTokenCache(verifier, { now: () => now });
    const exp = Math.floor(now / 1000) + 30;
    const token = await idp.sign({ sub: "expiring", exp });
    await cached.verify(token);
    now = exp * 1000 + 1;
    await cached.verify(token).catch(() => undefined);
    expect(checks).toBe(2);
  });

  it("when a token is remembered longer than the maximum age, then it is checked again", async () => {
    let now = Date.now();
    const cached = withVerifiedTokenCache(verifier, { now: () => now, maxAgeMs: 1_000 });
    const token = await idp.sign({ sub: "aged" });
    await cached.verify(token);
    now += 1_001;
    await cached.verify(token);
    expect(checks).toBe(2);
  });

  it("when a token fails, then it fails every time: a refusal is never remembered", async () => {
    const cached = withVerifiedTokenCache(verifier);
    const bad = tamperToken(await idp.sign({ sub: "bad" }));
    for (let i = 0; i < 2; i += 1) {
      await expect(cached.verify(bad)).rejects.toMatchObject({ code: "UNAUTHENTICATED", status: 401 });
    }
    expect(checks).toBe(2);
  });

  it("when more tokens are seen than the cache holds, then the oldest is forgotten first", async () => {
    const cached = withVerifiedTokenCache(verifier, { maxEntries: 2 });
    const [a, b, c] = await Promise.all(["a", "b", "c"].map((sub) => idp.sign({ sub })));
    for (const token of [a, b, c, c, b]) await cached.verify(token!);
    expect(checks).toBe(3);
    await cached.verify(a!);
    expect(checks).toBe(4);
  });
});
