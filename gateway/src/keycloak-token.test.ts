import { randomUUID } from "node:crypto";
import { startTestIdentityProvider, type TestIdentityProvider } from "@cgs/shared/testing/tokens";
import { describeWithKeycloak } from "@cgs/shared/testing/keycloak";
import { startTestGateway, type TestGateway } from "../../test/harnesses/gateway-harness";

const KEYCLOAK_URL = process.env.KEYCLOAK_URL ?? "http://127.0.0.1:8081";
const REALM = "cgs";
const ISSUER = `${KEYCLOAK_URL}/realms/${REALM}`;

async function form(url: string, body: Record<string, string>, token?: string): Promise<Response> {
  return fetch(url, {
    method: "POST",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    },
    body: new URLSearchParams(body),
  });
}

async function keycloakUserToken(): Promise<{ accessToken: string; userId: string }> {
  const admin = await form(`${ISSUER}/protocol/openid-connect/token`, {
    grant_type: "client_credentials",
    client_id: process.env.KEYCLOAK_ADMIN_CLIENT_ID ?? "cgs-admin",
    client_secret: process.env.KEYCLOAK_ADMIN_CLIENT_SECRET ?? "cgs-admin-local-secret",
  });
  expect(admin.status).toBe(200);
  const adminToken = ((await admin.json()) as { access_token: string }).access_token;
  const email = `gw-${randomUUID()}@example.com`;
  const password = `Pw-${randomUUID()}`;
  const created = await fetch(`${KEYCLOAK_URL}/admin/realms/${REALM}/users`, {
    method: "POST",
    headers: { authorization: `Bearer ${adminToken}`, "content-type": "application/json" },
    body: JSON.stringify({
      username: email,
      email,
      emailVerified: true,
      enabled: true,
      firstName: "Gate",
      lastName: "Way",
      credentials: [{ type: "password", value: password, temporary: false }],
    }),
  });
  expect(created.status).toBe(201);
  const userId = created.headers.get("location")!.split("/").pop()!;
  const login = await form(`${ISSUER}/protocol/openid-connect/token`, {
    grant_type: "password",
    client_id: "cgs-test",
    username: email,
    password,
    scope: "openid",
  });
  expect(login.status).toBe(200);
  return { accessToken: ((await login.json()) as { access_token: string }).access_token, userId };
}

let idp: TestIdentityProvider;
let gw: TestGateway | undefined;
afterAll(async () => {
  await gw?.close();
  await idp?.close();
});

describeWithKeycloak()("gateway with the real identity provider", () => {
  it("when a Keycloak access token is sent, then it is accepted and forwarded with its sub", async () => {
    idp = await startTestIdentityProvider();
    gw = await startTestGateway(idp, {
      env: {
        OIDC_ISSUER: ISSUER,
        OIDC_AUDIENCE: "cgs-api",
        OIDC_JWKS_URL: `${ISSUER}/protocol/openid-connect/certs`,
      },
    });
    const { accessToken, userId } = await keycloakUserToken();
    const res = await fetch(`${gw.url}/api/v1/credits/me`, {
      headers: { authorization: `Bearer ${accessToken}` },
    });
    expect(res.status).toBe(200);
    const seen = gw.upstreams.billing.requests.at(-1)!;
    expect(seen.headers.authorization).toBe(`Bearer ${accessToken}`);
    const payload = JSON.parse(Buffer.from(accessToken.split(".")[1]!, "base64url").toString()) as {
      sub: string;
    };
    expect(payload.sub).toBe(userId);

    const tampered = `${accessToken.slice(0, -4)}AAAA`;
    const rejected = await fetch(`${gw.url}/api/v1/credits/me`, {
      headers: { authorization: `Bearer ${tampered}` },
    });
    expect(rejected.status).toBe(401);
  });
});
