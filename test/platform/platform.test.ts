import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { startOtlpReceiver, type OtlpReceiver } from "@cgs/shared/testing/tracing";
import { waitUntil } from "@cgs/shared/testing/queue";

// `npm start` for real: the launcher with its peers, the four services on PGlite and the gateway, then Ctrl-C.
const root = path.resolve(__dirname, "../..");
const gatewayPort = 18080;
const servicePortBase = 18101;
const base = `http://127.0.0.1:${gatewayPort}`;

let platform: ChildProcess;
let output = "";
let pgliteRoot: string;
let traces: OtlpReceiver;

const portOpen = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });

function token(email: string): string {
  const result = spawnSync(process.execPath, ["test/platform/token.mjs", email], {
    cwd: root,
    encoding: "utf8",
  });
  if (result.status !== 0) throw new Error(`token command failed: ${result.stderr}`);
  return result.stdout.trim();
}

beforeAll(async () => {
  pgliteRoot = mkdtempSync(path.join(os.tmpdir(), "cgs-platform-"));
  traces = await startOtlpReceiver();
  platform = spawn(process.execPath, ["test/platform/start.mjs"], {
    cwd: root,
    env: {
      ...process.env,
      PORT: String(gatewayPort),
      SERVICES_PORT_BASE: String(servicePortBase),
      PGLITE_ROOT: pgliteRoot,
      LOG_LEVEL: "warn",
      OTEL_EXPORTER_OTLP_ENDPOINT: traces.endpoint,
      OTEL_BSP_SCHEDULE_DELAY: "100",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  platform.stdout?.on("data", (d) => (output += d));
  platform.stderr?.on("data", (d) => (output += d));
  const deadline = Date.now() + 150_000;
  while (!output.includes("platform up in")) {
    if (platform.exitCode !== null) throw new Error(`npm start exited early:\n${output}`);
    if (Date.now() > deadline) throw new Error(`npm start did not come up:\n${output}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}, 180_000);

afterAll(async () => {
  if (platform.exitCode === null) platform.kill("SIGKILL");
  rmSync(pgliteRoot, { recursive: true, force: true });
  await traces.close();
});

describe("npm start", () => {
  test("when the platform is up, then the gateway serves health and the contract on one origin", async () => {
    const health = await fetch(`${base}/api/v1/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ status: "ok" });
    const contract = await fetch(`${base}/openapi.json`);
    expect(contract.status).toBe(200);
    expect(((await contract.json()) as { openapi: string }).openapi).toMatch(/^3\.0\./);
  });

  test("when every service is up, then each answers its own readiness probe", async () => {
    for (let port = servicePortBase; port < servicePortBase + 4; port++) {
      const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
      expect(ready.status).toBe(200);
    }
  });

  test("when a request has no token, then the gateway answers 401 with the exact body", async () => {
    const res = await fetch(`${base}/api/v1/sessions/poll`);
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({
      error: "UNAUTHENTICATED",
      message: "Missing or invalid bearer token",
    });
  });

  test("when the token command's token is used, then the gateway lets it through to the owning service", async () => {
    const accessToken = token(`platform-${Date.now()}@example.com`);
    expect(accessToken.split(".")).toHaveLength(3);
    const res = await fetch(`${base}/api/v1/settings`, {
      headers: { authorization: `Bearer ${accessToken}` },
    });
    // Authenticated at the gateway and again at the service; the answer comes from the accounts service.
    expect(res.status).not.toBe(401);
    expect(res.headers.get("x-ratelimit-limit")).toBe("60");
    expect(await res.json()).toHaveProperty(res.status === 200 ? "fps" : "error");
  });

  test("when a request crosses the gateway into a service, then both processes report spans of one trace", async () => {
    const requestId = `trace-${Date.now()}`;
    const accessToken = token(`trace-${Date.now()}@example.com`);
    await fetch(`${base}/api/v1/session`, {
      headers: { authorization: `Bearer ${accessToken}`, "x-request-id": requestId },
    });
    await waitUntil(
      () => {
        const ids = (service: string) =>
          new Set(
            traces
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
    const exited = new Promise<number | null>((resolve) => platform.once("exit", (code) => resolve(code)));
    platform.kill("SIGINT");
    expect(await exited).toBe(0);
    for (const port of [
      gatewayPort,
      servicePortBase,
      servicePortBase + 1,
      servicePortBase + 2,
      servicePortBase + 3,
    ]) {
      expect(await portOpen(port)).toBe(false);
    }
  }, 30_000);
});
