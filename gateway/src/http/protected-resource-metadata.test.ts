import { startTestIdentityProvider, type TestIdentityProvider } from "@cgs/shared/testing/tokens";
import { startTestGateway, type TestGateway } from "../../../test/harnesses/gateway-harness";

let idp: TestIdentityProvider;
let gw: TestGateway;
const publicBase = "https://play.test.example";

beforeAll(async () => {
  idp = await startTestIdentityProvider();
  gw = await startTestGateway(idp, { env: { PUBLIC_BASE_URL: publicBase, RATE_LIMIT_READ: "3" } });
});
afterAll(async () => {
  await gw.close();
  await idp.close();
});

describe("protected resource metadata (RFC 9728)", () => {
  it("when a client asks where tokens come from, then the gateway names its public origin and OIDC issuer", async () => {
    const res = await fetch(`${gw.url}/.well-known/oauth-protected-resource`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await res.json()).toMatchObject({
      resource: publicBase,
      authorization_servers: [idp.issuer],
      bearer_methods_supported: ["header"],
    });
  });

  it("when a bearer is refused, then the 401 points at the metadata in WWW-Authenticate", async () => {
    const res = await fetch(`${gw.url}/api/v1/credits/me`, { headers: { authorization: "Bearer nope" } });
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toBe(
      `Bearer resource_metadata="${publicBase}/.well-known/oauth-protected-resource"`,
    );
    expect(await res.json()).toEqual({
      error: "UNAUTHENTICATED",
      message: "Missing or invalid bearer token",
    });
  });

  it("when one IP asks more often than the read limit, then it gets 429 with Retry-After", async () => {
    const statuses: number[] = [];
    let retryAfter: string | null = null;
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${gw.url}/.well-known/oauth-protected-resource`);
      statuses.push(res.status);
      if (res.status === 429) retryAfter = res.headers.get("retry-after");
    }
    expect(statuses).toContain(429);
    expect(Number(retryAfter)).toBeGreaterThan(0);
  });
});
