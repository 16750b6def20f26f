import { spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { freePort } from "@cgs/shared/testing/ports";
import { waitUntil } from "@cgs/shared/testing/queue";
import { launchPlatform, localToken, portOpen, repoRoot, type LaunchedPlatform } from "./launch-platform";

// `npm start` for real: the launcher with its peers, the four services on PGlite and the gateway, then Ctrl-C.
let platform: LaunchedPlatform;

beforeAll(async () => {
  platform = await launchPlatform({ gatewayPort: 18080, servicePortBase: 18101 });
}, 180_000);

afterAll(() => platform.cleanup());

describe("npm start", () => {
  test("when the platform is up, then the gateway serves health and the contract on one origin", async () => {
    const health = await fetch(`${platform.base}/api/v1/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ status: "ok" });
    const contract = await fetch(`${platform.base}/openapi.json`);
    expect(contract.status).toBe(200);
    expect(((await contract.json()) as { openapi: string }).openapi).toMatch(/^3\.0\./);
  });

  test("when npm start has come up, then its processes run on Node 24 and each peer took one line", async () => {
    for (const port of [platform.gatewayPort, ...platform.servicePorts]) {
      const metrics = await (await fetch(`http://127.0.0.1:${port + 1000}/metrics`)).text();
      expect(metrics).toMatch(/^nodejs_version_info\{version="v24\./m);
    }
    const started = platform.output().split("platform up in")[0]!;
    for (const peer of ["moto", "stripe-mock", "keycloak", "mailpit", "node 24", "headscale"]) {
      const lines = started.split("\n").filter((l) => l.startsWith(`[platform] ${peer}: `));
      expect({ peer, lines: lines.length }).toEqual({ peer, lines: 1 });
    }
    // The peer scripts' own output (and any package manager's) goes to their logs, not the terminal.
    expect(started).not.toContain("[peers]");
  });

  test("when every service is up, then each answers its own readiness probe", async () => {
    for (const port of platform.servicePorts) {
      const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
      expect(ready.status).toBe(200);
    }
  });

  test("when a request has no token, then the gateway answers 401 with the exact body", async () => {
    const res = await fetch(`${platform.base}/api/v1/sessions/poll`);
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({
      error: "UNAUTHENTICATED",
      message: "Missing or invalid bearer token",
    });
  });

  test("when the token command's token is used, then the gateway lets it through to the owning service", async () => {
    const accessToken = localToken(`platform-${Date.now()}@example.com`);
    expect(accessToken.split(".")).toHaveLength(3);
    const res = await fetch(`${platform.base}/api/v1/settings`, {
      headers: { authorization: `Bearer ${accessToken}` },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-ratelimit-limit")).toBe("60");
    expect(await res.json()).toHaveProperty("fps");
  });

  test("when a player tops up, then the local checkout page is on the gateway's origin under its strict CSP and paying there credits the wallet", async () => {
    const accessToken = localToken(`checkout-${Date.now()}@example.com`);
    const auth = { authorization: `Bearer ${accessToken}` };
    const topup = await fetch(`${platform.base}/api/v1/credits/topup`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json", "idempotency-key": `${Date.now()}-checkout` },
      body: JSON.stringify({ amount: 2_000 }),
    });
    expect(topup.status).toBe(200);
    const { checkoutUrl } = (await topup.json()) as { checkoutUrl: string };
    expect(checkoutUrl).toMatch(new RegExp(`^${platform.base}/local-checkout/cs_local_`));

    const page = await fetch(checkoutUrl);
    expect(page.status).toBe(200);
    const csp = page.headers.get("content-security-policy") ?? "";
    for (const directive of [
      "default-src 'self'",
      "style-src 'self'",
      "script-src 'self'",
      "form-action 'self'",
    ])
      expect(csp).toContain(directive);
    expect(csp).not.toContain("unsafe-inline");
    const html = await page.text();
    expect(html).not.toContain("<style");
    const stylesheet = await fetch(`${platform.base}/local-checkout/style.css`);
    expect(stylesheet.headers.get("content-type")).toMatch(/^text\/css/);

    const paid = await fetch(`${checkoutUrl}/pay`, {
      method: "POST",
      redirect: "manual",
      headers: { origin: platform.base },
    });
    expect(paid.status).toBe(303);
    expect(paid.headers.get("location")).toMatch(new RegExp(`^${platform.base}/`));
    await waitUntil(
      async () => {
        const me = await fetch(`${platform.base}/api/v1/credits/me`, { headers: auth });
        return ((await me.json()) as { balance: number }).balance > 0 ? true : undefined;
      },
      { timeoutMs: 15_000, description: "the top-up credited" },
    );
  });

  test("when a request crosses the gateway into a service, then both processes report spans of one trace", async () => {
    const accessToken = localToken(`trace-${Date.now()}@example.com`);
    await fetch(`${platform.base}/api/v1/session`, { headers: { authorization: `Bearer ${accessToken}` } });
    await waitUntil(
      () => {
        const ids = (service: string) =>
          new Set(
            platform.traces
              .spans()
              .filter((s) => s.serviceName === service && s.kind === 2)
              .map((s) => s.traceId),
          );
        const gateway = ids("gateway");
        return [...ids("accounts")].some((id) => gateway.has(id));
      },
      { timeoutMs: 15_000, description: "a trace with a gateway server span and an accounts server span" },
    );
  });

  test("when Ctrl-C is pressed, then every process the launcher started stops", async () => {
    expect(await platform.interrupt()).toBe(0);
    for (const port of [platform.gatewayPort, ...platform.servicePorts]) {
      expect(await portOpen(port)).toBe(false);
    }
  }, 30_000);
});

describe("npm start when a peer cannot be installed", () => {
  test("when a peer's install fails, then that peer's line says so with the end of its log, and npm start exits 1", async () => {
    const empty = mkdtempSync(path.join(os.tmpdir(), "cgs-empty-cache-"));
    // stripe-mock on a port of its own, an empty cache and no Go toolchain: its install cannot succeed.
    const run = spawnSync(process.execPath, ["test/platform/start.mjs", "--skip-observability"], {
      cwd: repoRoot,
      env: {
        ...process.env,
        PATH: "/usr/bin:/bin",
        CGS_CACHE_DIR: empty,
        CGS_STATE_DIR: path.join(empty, "state"),
        STRIPE_MOCK_PORT: String(await freePort()),
        STRIPE_MOCK_HTTPS_PORT: String(await freePort()),
        PORT: "18390",
        SERVICES_PORT_BASE: "18391",
      },
      encoding: "utf8",
      timeout: 60_000,
    });
    // The whole terminal output is in the assertion, so a failure shows what npm start printed instead.
    expect({ status: run.status, stderr: run.stderr }).toEqual({
      status: 1,
      stderr: expect.stringMatching(/^\[platform\] stripe-mock: FAILED after /m),
    });
    const lines = run.stderr.split("\n");
    const failed = lines.findIndex((l) =>
      /^\[platform\] stripe-mock: FAILED after [\d.]+ s; the last lines of /.test(l),
    );
    expect(failed).toBeGreaterThanOrEqual(0);
    expect(lines.slice(failed + 1).join("\n")).toMatch(/^ {4}\[peers\] stripe-mock: ERROR: go is required/m);
    // Nothing of the peer scripts reaches the terminal except that tail.
    expect(lines.filter((l) => l.startsWith("[peers]"))).toEqual([]);
  }, 90_000);
});

describe("npm start beside something already listening", () => {
  test("when a platform port is taken, then it refuses to start and names the port", async () => {
    const squatter = net.createServer().listen(0, "127.0.0.1");
    await new Promise((resolve) => squatter.once("listening", resolve));
    const port = (squatter.address() as net.AddressInfo).port;
    try {
      const run = spawnSync(process.execPath, ["test/platform/start.mjs"], {
        cwd: repoRoot,
        env: { ...process.env, PORT: String(port), SERVICES_PORT_BASE: "18301" },
        encoding: "utf8",
        timeout: 30_000,
      });
      expect(run.status).toBe(1);
      expect(run.stderr).toContain(`port ${port} (gateway) is already in use`);
    } finally {
      squatter.close();
    }
  });
});
