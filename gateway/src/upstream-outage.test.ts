import { startTestIdentityProvider, type TestIdentityProvider } from "@cgs/shared/testing/tokens";
import { startTestGateway, type TestGateway } from "../../test/harnesses/gateway-harness";

// Fault: one service down (its port refuses) and one hung (accepts, never answers). Real HTTP servers stand in
// for the services; the gateway is the real one.
jest.setTimeout(30_000);

let idp: TestIdentityProvider;
let gw: TestGateway;
const hungSockets: { closedAt?: number }[] = [];

beforeAll(async () => {
  idp = await startTestIdentityProvider();
  gw = await startTestGateway(idp, {
    env: { UPSTREAM_TIMEOUT_MS: "500", UPSTREAM_CONNECT_TIMEOUT_MS: "300" },
    upstreamHandler: (req, res) => {
      if (req.url.startsWith("/api/v1/credits")) {
        const seen: { closedAt?: number } = {};
        hungSockets.push(seen);
        res.on("close", () => (seen.closedAt = Date.now()));
        return; // billing hangs
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ ok: true, path: req.url }));
    },
  });
  await gw.upstreams.sessions.close(); // sessions is down
});

afterAll(async () => {
  await gw.close();
  await idp.close();
});

async function call(method: string, path: string) {
  const started = Date.now();
  const res = await fetch(`${gw.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${await idp.sign({ sub: "outage-player" })}` },
  });
  const body: unknown = await res.json().catch(() => undefined);
  return { status: res.status, body, ms: Date.now() - started, retryAfter: res.headers.get("retry-after") };
}

describe("fault: a service down or hung", () => {
  it("when the sessions service is down, then its routes answer 503 UNAVAILABLE at once and the others keep serving", async () => {
    const down = await call("GET", "/api/v1/sessions/poll");
    expect(down).toMatchObject({
      status: 503,
      body: { error: "UNAVAILABLE", message: "The sessions service is unavailable" },
      retryAfter: "5",
    });
    expect(down.ms).toBeLessThan(1_000);
    expect(await call("GET", "/api/v1/settings")).toMatchObject({ status: 200 });
  });

  it("when the billing service hangs, then the gateway answers 503 at its timeout and releases the upstream socket", async () => {
    const started = Date.now();
    const hung = await call("GET", "/api/v1/credits/me");
    expect(hung).toMatchObject({
      status: 503,
      body: { error: "UNAVAILABLE", message: "The billing service did not answer in time" },
    });
    expect(hung.ms).toBeGreaterThanOrEqual(450);
    expect(hung.ms).toBeLessThan(2_000);
    await new Promise((r) => setTimeout(r, 100));
    expect(hungSockets.at(-1)?.closedAt).toBeDefined();
    expect(hungSockets.at(-1)!.closedAt! - started).toBeLessThan(2_000);
    expect(await call("GET", "/api/v1/settings")).toMatchObject({ status: 200 });
  });
});
