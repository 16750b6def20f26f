import type { Socket } from "node:net";
import { startTestIdentityProvider, type TestIdentityProvider } from "@cgs/shared/testing/tokens";
import { startTestGateway, type TestGateway } from "../../../test/harnesses/gateway-harness";

// The upstream side of the proxy on real sockets: a real gateway in front of real HTTP servers that misbehave on
// purpose (drop a pooled connection, hang, answer a large body).
jest.setTimeout(30_000);

let idp: TestIdentityProvider;
let gw: TestGateway;
// Requests each upstream connection has seen; the second one on a connection is dropped unanswered.
const seenOn = new WeakMap<Socket, number>();
let dropSecondRequest = false;
const hung: { closed: boolean }[] = [];
const LARGE = Buffer.alloc(4 * 1024 * 1024, "a");

beforeAll(async () => {
  idp = await startTestIdentityProvider();
  gw = await startTestGateway(idp, {
    env: { UPSTREAM_TIMEOUT_MS: "5000" },
    upstreamHandler: (req, res) => {
      const socket = res.socket!;
      const n = (seenOn.get(socket) ?? 0) + 1;
      seenOn.set(socket, n);
      if (dropSecondRequest && n === 2) {
        // The keep-alive race: the service closes a pooled connection as the next request arrives on it.
        socket.destroy();
        return;
      }
      if (req.url.startsWith("/api/v1/credits/transactions")) {
        const entry = { closed: false };
        hung.push(entry);
        res.on("close", () => (entry.closed = true));
        return; // never answers
      }
      if (req.url.startsWith("/api/v1/billing/storage")) {
        res.writeHead(200, { "content-type": "application/octet-stream", "content-length": LARGE.length });
        res.end(LARGE);
        return;
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ path: req.url, method: req.method }));
    },
  });
});

afterAll(async () => {
  await gw.close();
  await idp.close();
});

afterEach(() => {
  dropSecondRequest = false;
});

const bearer = async () => ({ authorization: `Bearer ${await idp.sign({ sub: "proxy-player" })}` });
const requestsTo = (path: string) => gw.upstreams.sessions.requests.filter((r) => r.url === path).length;

describe("gateway upstream proxy", () => {
  it("when a pooled connection breaks before the service answers a read, then the read is replayed once and the client gets the answer", async () => {
    const headers = await bearer();
    expect((await fetch(`${gw.url}/api/v1/sessions/poll`, { headers })).status).toBe(200);
    dropSecondRequest = true;
    const before = requestsTo("/api/v1/sessions/poll");
    const res = await fetch(`${gw.url}/api/v1/sessions/poll`, { headers });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ path: "/api/v1/sessions/poll", method: "GET" });
    // The dropped attempt and its replay on a fresh connection.
    expect(requestsTo("/api/v1/sessions/poll") - before).toBe(2);
  });

  it("when a pooled connection breaks before the service answers a write, then it is not replayed and the client gets 503 UNAVAILABLE", async () => {
    const headers = await bearer();
    expect((await fetch(`${gw.url}/api/v1/sessions/poll`, { headers })).status).toBe(200);
    dropSecondRequest = true;
    const before = requestsTo("/api/v1/sessions/stop");
    const res = await fetch(`${gw.url}/api/v1/sessions/stop`, { method: "POST", headers });
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({
      error: "UNAVAILABLE",
      message: "The sessions service is unavailable",
    });
    expect(res.headers.get("retry-after")).toBe("5");
    // The service may have applied it: a stop is sent once, and the caller decides whether to retry.
    expect(requestsTo("/api/v1/sessions/stop") - before).toBe(1);
  });

  it("when the service answers a large body, then every byte reaches the client", async () => {
    const res = await fetch(`${gw.url}/api/v1/billing/storage`, { headers: await bearer() });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-length")).toBe(String(LARGE.length));
    const body = Buffer.from(await res.arrayBuffer());
    expect(body.equals(LARGE)).toBe(true);
  });

  it("when the client hangs up while the service is still working, then the gateway closes its upstream request", async () => {
    const aborted = new AbortController();
    const pending = fetch(`${gw.url}/api/v1/credits/transactions`, {
      headers: await bearer(),
      signal: aborted.signal,
    }).catch((err: unknown) => err);
    await waitFor(() => hung.length === 1);
    aborted.abort();
    expect(await pending).toMatchObject({ name: "AbortError" });
    // Well before the 5 s response timeout: the upstream connection goes with the client.
    await waitFor(() => hung[0]!.closed, 2_000);
  });
});

async function waitFor(done: () => boolean, timeoutMs = 5_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > until) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 20));
  }
}
