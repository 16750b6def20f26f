import { startCuttableProxy, type CuttableProxy } from "@cgs/shared/testing/cuttable-proxy";
import {
  createTestUser,
  keycloakTestSettings,
  passwordGrant,
  uniqueEmail,
  type TestUser,
} from "@cgs/shared/testing/keycloak";
import {
  startTestIdentityProvider,
  TEST_ALLOWED_AZP_ENV,
  type TestIdentityProvider,
} from "@cgs/shared/testing/tokens";
import { startTestAccounts, type TestAccountsServer } from "../../test/harnesses/accounts-server";
import { startTestGateway, type TestGateway } from "../../test/harnesses/gateway-harness";

// Fault: the identity provider unreachable. The real Keycloak (shared peer, never stopped) sits behind a TCP
// hop in this process that the test cuts: the gateway and a real service (accounts) fetch the JWKS through it.
jest.setTimeout(60_000);

const issuer = `${keycloakTestSettings.baseUrl}/realms/${keycloakTestSettings.realm}`;
const PASSWORD = "fault-test-password-1";

let proxy: CuttableProxy;
let forger: TestIdentityProvider;
let user: TestUser;
let gw: TestGateway;
let accounts: TestAccountsServer;

beforeAll(async () => {
  const keycloak = new URL(keycloakTestSettings.baseUrl);
  proxy = await startCuttableProxy({ host: keycloak.hostname, port: Number(keycloak.port) });
  const env = {
    OIDC_ISSUER: issuer,
    OIDC_AUDIENCE: "cgs-api",
    OIDC_JWKS_URL: `${proxy.url}/realms/${keycloakTestSettings.realm}/protocol/openid-connect/certs`,
    OIDC_ALLOWED_AZP: TEST_ALLOWED_AZP_ENV,
    OIDC_JWKS_COOLDOWN_MS: "0",
    LOG_LEVEL: "silent",
  };
  forger = await startTestIdentityProvider();
  gw = await startTestGateway(forger, { env });
  accounts = await startTestAccounts({ db: "pglite", name: "faults_idp_accounts", env });
  user = await createTestUser(uniqueEmail("idp-outage"), { password: PASSWORD });
});

afterAll(async () => {
  await proxy?.close();
  await gw?.close();
  await accounts?.close();
  await user?.remove();
  await forger?.close();
});

async function call(base: string, path: string, token: string) {
  const started = Date.now();
  const res = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${token}` } });
  const body: unknown = await res.json().catch(() => undefined);
  return { status: res.status, body, retryAfter: res.headers.get("retry-after"), ms: Date.now() - started };
}

describe("fault: identity provider unreachable", () => {
  it("when the JWKS cannot be fetched, then known-key tokens keep working and an unknown kid answers 503 UNAVAILABLE (never 401), on the gateway and on a service", async () => {
    const grant = await passwordGrant(user.email, PASSWORD);
    expect(grant.status).toBe(200);
    const token = grant.accessToken!;
    // A token that looks like Keycloak's but carries a key id Keycloak never published.
    const unknownKid = await forger.sign({ iss: issuer, aud: "cgs-api", sub: user.id });

    expect((await call(gw.url, "/api/v1/credits/me", token)).status).toBe(200);
    expect((await call(accounts.url, "/api/v1/settings", token)).status).toBe(200);

    await proxy.cut();
    try {
      for (const [base, path] of [
        [gw.url, "/api/v1/credits/me"],
        [accounts.url, "/api/v1/settings"],
      ] as const) {
        expect((await call(base, path, token)).status).toBe(200);
        const refused = await call(base, path, unknownKid);
        expect(refused).toMatchObject({
          status: 503,
          body: { error: "UNAVAILABLE", message: expect.any(String) },
          retryAfter: "5",
        });
        expect(refused.ms).toBeLessThan(6_000);
      }
    } finally {
      await proxy.restore();
    }

    // The provider is back: the forged key is now judged, and refused as a bad token.
    expect((await call(gw.url, "/api/v1/credits/me", unknownKid)).status).toBe(401);
    expect((await call(accounts.url, "/api/v1/settings", unknownKid)).status).toBe(401);
  });
});
