import { refreshGrant, uniqueEmail } from "@cgs/shared/testing/keycloak";
import { startRecordingListener, type RecordingListener } from "@cgs/shared/testing/recording-listener";
import { createClient, discoverIssuer } from "./index";
import { expiredCopy, localSession, recordingFetch } from "../../../test/harnesses/client-platform";

// Where the SDK sends tokens: a listener of the test's own records every request, the real Keycloak issues them.
const KEYCLOAK_ISSUER = `${process.env.KEYCLOAK_URL || "http://127.0.0.1:8081"}/realms/cgs`;
let stranger: RecordingListener;

beforeAll(async () => {
  stranger = await startRecordingListener({
    api: (req) =>
      req.url === "/api/v1/credits/me"
        ? { status: 200, body: { balance: 0, currency: "USD" } }
        : { status: 404, body: { error: "NOT_FOUND", message: "Route not found" } },
  });
});
afterAll(() => stranger.close());

describe("a session refreshes only where it was issued", () => {
  test("when the API origin names another identity provider, then the expired session refreshes at its own issuer and the origin never sees the refresh token", async () => {
    const real = localSession(uniqueEmail("sdk-origin"));
    const recorder = recordingFetch();
    const client = createClient({
      baseUrl: stranger.url,
      session: { accessToken: expiredCopy(real.accessToken), refreshToken: real.refreshToken },
      fetch: recorder.fetch,
    });
    await client.credits.me();
    const tokenCalls = recorder.calls.filter((c) => c.method === "POST").map((c) => c.url);
    expect(tokenCalls).toEqual([`${KEYCLOAK_ISSUER}/protocol/openid-connect/token`]);
    expect(stranger.requests.map((r) => `${r.method} ${r.url}`)).toEqual(["GET /api/v1/credits/me"]);
    expect(JSON.stringify(stranger.requests)).not.toContain(real.refreshToken);
    // The rotation happened at Keycloak: the old refresh token is spent there.
    expect((await refreshGrant(real.refreshToken)).error).toBe("invalid_grant");
  });

  test("when the issuer is pinned, then the client's identity provider is that issuer's, whatever the origin names", async () => {
    const client = createClient({ baseUrl: stranger.url, issuer: KEYCLOAK_ISSUER, apiKey: "x.y.z" });
    expect((await client.authorizationServer()).tokenEndpoint).toBe(
      `${KEYCLOAK_ISSUER}/protocol/openid-connect/token`,
    );
  });

  test("when an issuer's OpenID configuration names another issuer, then discovery is refused", async () => {
    const lying = await startRecordingListener({ claimedIssuer: KEYCLOAK_ISSUER });
    try {
      const refused = createClient({ baseUrl: lying.url }).authorizationServer();
      await expect(refused).rejects.toMatchObject({
        code: "DISCOVERY_FAILED",
        message: expect.stringContaining(`names another issuer (${KEYCLOAK_ISSUER})`),
      });
      await expect(discoverIssuer(lying.url, fetch)).rejects.toMatchObject({ code: "DISCOVERY_FAILED" });
    } finally {
      await lying.close();
    }
    // An honest one (the stranger names itself throughout) is accepted, trailing slash or not.
    await expect(discoverIssuer(`${stranger.url}/`, fetch)).resolves.toMatchObject({ issuer: stranger.url });
  });
});

describe("plain http", () => {
  test("when the base URL or the issuer is plain http to another machine, then createClient refuses it; https and loopback pass", () => {
    expect(() => createClient({ baseUrl: "http://play.example.com" })).toThrow(
      /The API base URL http:\/\/play\.example\.com uses plain http.*only for loopback/,
    );
    expect(() =>
      createClient({ baseUrl: "https://play.example.com", issuer: "http://id.example.com/realms/cgs" }),
    ).toThrow(/identity provider.*plain http/);
    for (const ok of [
      "https://play.example.com",
      "http://127.0.0.1:8080",
      "http://127.9.9.9",
      "http://localhost:8080",
      "http://[::1]:8080",
    ]) {
      expect(createClient({ baseUrl: ok }).baseUrl).toBe(ok);
    }
    expect(() => createClient({ baseUrl: "http://127.0.0.1.example.com" })).toThrow(/plain http/);
  });
});
