import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { startOtlpReceiver, type OtlpReceiver } from "@cgs/shared/testing/tracing";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export const repoRoot = path.resolve(__dirname, "../..");

export interface LaunchedPlatform {
  base: string;
  gatewayPort: number;
  servicePorts: number[];
  traces: OtlpReceiver;
  /** The private network's control plane the sessions service uses (its REST API and API key). */
  headscale: { url: string; apiKey: string };
  process: ChildProcess;
  output(): string;
  /** The latest pid the launcher printed for a service (with PLATFORM_RESTART_KILLED=1 it prints one per start). */
  pidOf(service: string): number | undefined;
  /** Ctrl-C, as a developer would; resolves with the launcher's exit code. */
  interrupt(): Promise<number | null>;
  cleanup(): Promise<void>;
}

/** Runs `npm start`'s launcher on its own ports and PGlite directory, exporting traces to an in-test receiver. */
export async function launchPlatform(options: {
  gatewayPort: number;
  servicePortBase: number;
  env?: Record<string, string>;
  /** Bring up Prometheus and Zipkin on these ports (traces then go to Zipkin); left out otherwise. */
  observability?: { prometheusPort: number; zipkinPort: number };
}): Promise<LaunchedPlatform> {
  const pgliteRoot = mkdtempSync(path.join(os.tmpdir(), "cgs-platform-"));
  // Every launch's ports are its own (jest runs platform tests in parallel workers): gateway + 9 is free in each.
  const headscalePort = options.gatewayPort + 9;
  const headscaleDir = path.join(pgliteRoot, "headscale");
  const traces = await startOtlpReceiver();
  let output = "";
  const child = spawn(process.execPath, ["test/platform/start.mjs"], {
    cwd: repoRoot,
    env: {
      ...process.env,
      PORT: String(options.gatewayPort),
      SERVICES_PORT_BASE: String(options.servicePortBase),
      PGLITE_ROOT: pgliteRoot,
      HEADSCALE_PORT: String(headscalePort),
      HEADSCALE_STATE_DIR: headscaleDir,
      LOG_LEVEL: "warn",
      OTEL_EXPORTER_OTLP_ENDPOINT: traces.endpoint,
      OTEL_BSP_SCHEDULE_DELAY: "100",
      ...(options.observability
        ? {
            PROMETHEUS_PORT: String(options.observability.prometheusPort),
            ZIPKIN_PORT: String(options.observability.zipkinPort),
            PROMETHEUS_SCRAPE_INTERVAL: "1s",
          }
        : { CGS_SKIP_PROMETHEUS: "1", CGS_SKIP_ZIPKIN: "1" }),
      ...options.env,
    },
    stdio: ["ignore", "pipe", "pipe"],
    // Its own process group, so cleanup can end the launcher and every service it started at once.
    detached: true,
  });
  child.stdout?.on("data", (d) => (output += d));
  child.stderr?.on("data", (d) => (output += d));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  // A cold cache builds Headscale first (minutes); test/run-tests.sh builds it before the suites.
  const deadline = Date.now() + 150_000;
  while (!output.includes("platform up in")) {
    if (child.exitCode !== null) throw new Error(`npm start exited early:\n${output}`);
    if (Date.now() > deadline) throw new Error(`npm start did not come up:\n${output}`);
    await new Promise((r) => setTimeout(r, 250));
  }
  return {
    base: `http://127.0.0.1:${options.gatewayPort}`,
    gatewayPort: options.gatewayPort,
    servicePorts: [0, 1, 2, 3].map((i) => options.servicePortBase + i),
    traces,
    headscale: {
      url: `http://127.0.0.1:${headscalePort}`,
      get apiKey() {
        return readFileSync(path.join(headscaleDir, "api-key"), "utf8").trim();
      },
    },
    process: child,
    output: () => output,
    pidOf(service) {
      const pids = [...output.matchAll(new RegExp(`^\\[platform\\] ${service} pid (\\d+)$`, "gm"))];
      return pids.length ? Number(pids.at(-1)![1]) : undefined;
    },
    async interrupt() {
      child.kill("SIGINT");
      return exited;
    },
    async cleanup() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGINT");
        const stopped = await Promise.race([exited.then(() => true), sleep(15_000).then(() => false)]);
        if (!stopped) process.kill(-child.pid!, "SIGKILL");
      }
      rmSync(pgliteRoot, { recursive: true, force: true });
      await traces.close();
    },
  };
}

/** Short simulator and worker intervals so a whole journey runs in seconds, on queues of its own. */
export function fastJourneyEnv(queueNamePrefix: string): Record<string, string> {
  return {
    SIMULATOR_BOOT_DELAY_MS: "300",
    SIMULATOR_HOST_READY_DELAY_MS: "300",
    RECONCILER_INTERVAL_MS: "200",
    METERING_INTERVAL_MS: "200",
    QUEUE_WAIT_SECONDS: "1",
    QUEUE_NAME_PREFIX: queueNamePrefix,
  };
}

/** Calls the platform's API as a signed-in player: JSON in, the parsed JSON body (or {}) out. */
export async function callApi<T = Record<string, unknown>>(
  base: string,
  token: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: T; headers: Headers }> {
  const res = await fetch(`${base}/api/v1${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : {}) as T, headers: res.headers };
}

/** `npm run --silent token -- <email>`: a real access token from the local Keycloak. */
export function localToken(email: string): string {
  const result = spawnSync(process.execPath, ["test/platform/token.mjs", email], {
    cwd: repoRoot,
    encoding: "utf8",
  });
  if (result.status !== 0) throw new Error(`token command failed: ${result.stderr}`);
  return result.stdout.trim();
}

export const portOpen = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
