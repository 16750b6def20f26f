/**
 * Sessions benchmark: prints numbers beside their baselines, asserts nothing.
 *   npx tsc -b services/sessions gateway && \
 *     npx tsx --tsconfig tsconfig.test.json services/sessions/bench/sessions-bench.ts [--quick] [--profile]
 * Needs PostgreSQL (TEST_DATABASE_URL), moto for the service's queue (AWS_ENDPOINT_URL), Redis for the gateway's
 * limits (REDIS_URL), and wrk and nginx (test/peers/bench-tools.sh).
 *
 * 1. Poll: the sessions service and the gateway run as their built processes the way production starts them
 *    (telemetry preloaded, sampling 10 %, spans to an in-process OTLP receiver; log level info), the service on
 *    PostgreSQL. The gateway runs on BENCH_GATEWAY_NODE (npm run bench passes the images' Node 24) with the prod
 *    chart's NODE_OPTIONS and memory limit, as in gateway-bench. The service stays on this script's Node, the one
 *    its recorded pre-issue-13 figure was measured on. wrk (-t2 -c32) spreads the polls over 100 accounts, each
 *    with a running session, straight to the service and through the gateway (JWT, Redis limits, validation,
 *    forward). Rows: direct vs through the gateway (target ≥ 0.8×), direct vs the figure recorded on the service
 *    before issue 13 (target ≥ 4×). The same polls also go through nginx and through the bare Node proxy (no checks;
 *    test/bench/proxies.ts, as in gateway-bench), the ceilings of any proxy and of any Node proxy on this path, and
 *    each path's CPU per poll is split by process (the proxy, the service, PostgreSQL) and for the whole machine.
 *    With --profile the service and the gateway run under `node --cpu-prof` and each one's self time is printed by
 *    package.
 * 2. Reconciler cloud calls (skipped with --poll-only) and wall time per tick at 10, 1,000 and 10,000 active sessions on the simulator.
 */
import { type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmdirSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { openDatabase } from "@cgs/shared";
import { createTestDatabase } from "@cgs/shared/testing/db";
import { startTestIdentityProvider, TEST_ALLOWED_AZP_ENV } from "@cgs/shared/testing/tokens";
import { startOtlpReceiver } from "@cgs/shared/testing/tracing";
import { formatNumber, reportRows, type BenchRow } from "../../../test/bench/results";
import {
  GATEWAY_NODE,
  memoryCgroup,
  nodeVersion,
  productionGateway,
  spawnNode,
} from "../../../test/bench/production-gateway";
import { cpuDuring, pidsNamed, usPerRequest, type CpuSpent } from "../../../test/bench/process-cpu";
import { waitAnswering, stopChild } from "../../../test/bench/processes";
import { nginxPids, startBareProxy, startNginx, stopNginx } from "../../../test/bench/proxies";
import { runWrk, type LoadResult } from "../../../test/bench/wrk";
import { closedPortUrl } from "../../../test/harnesses/gateway-harness";
import * as schema from "../src/data/schema";
import { sessionsTable } from "../src/data/session-tables";
import { Reconciler } from "../src/domain/reconciler";
import {
  migrationsFolder,
  startSessionsHarness,
  type SessionsHarness,
} from "../src/testing/sessions-harness";

const root = path.resolve(__dirname, "..", "..", "..");
const quick = process.argv.includes("--quick");
const profile = process.argv.includes("--profile");
const POLL_SECONDS = quick ? 4 : 10;
const ACCOUNTS = 100;
const FLEETS = quick ? [10, 1000] : [10, 1000, 10000];
/**
 * Poll straight to the service on this machine before issue 13 (commit 826a0cd), with this benchmark's own setup
 * (wrk -t2 -c32, 100 accounts, telemetry at 10 %); four runs gave 562, 588, 612 and 654 req/s. The figure the
 * ≥ 4× target is measured against.
 */
const BEFORE_ISSUE_13_DIRECT_RPS = 600;

/** CPU seconds spent over a run, as µs a poll. */
const usPerPoll = (seconds: number, load: LoadResult): number => usPerRequest(seconds, load.requests);

/** "gateway 150 µs, sessions 300 µs, whole machine 900 µs; 97 % of 2 cores busy": CPU a poll, by process and in all. */
function cpuPerPoll(spent: CpuSpent, load: LoadResult, groups: string[]): string {
  const us = (seconds: number) => `${formatNumber(usPerPoll(seconds, load))} µs`;
  return (
    `${groups.map((g) => `${g} ${us(spent.seconds[g] ?? NaN)}`).join(", ")}, whole machine ${us(spent.machineSeconds)}; ` +
    `${fmt(spent.machineBusy * 100, 0)} % of ${spent.cores} cores busy`
  );
}

const fmt = (n: number, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : "-");
const rps = (r: LoadResult) => `${formatNumber(r.rps)} req/s`;
const latency = (r: LoadResult) => `p50 ${fmt(r.p50ms, 2)} ms, p99 ${fmt(r.p99ms, 2)} ms`;

function startProcess(
  dir: string,
  args: string[],
  env: Record<string, string>,
  runtime: { nodeBin?: string; cgroup?: string } = {},
): ChildProcess {
  return spawnNode(
    runtime.nodeBin ?? process.execPath,
    [...args, "--import", "@cgs/shared/dist/telemetry.js", "dist/main.js"],
    { cwd: path.join(root, dir), env: { ...process.env, ...env } },
    runtime.cgroup,
  );
}

/** Self time of a CPU profile summed by package (or "sessions", "shared", "node:" internals, "(gc)", ...). */
function selfTimeByPackage(profileFile: string, top = 12): string[] {
  const prof = JSON.parse(readFileSync(profileFile, "utf8")) as {
    nodes: { id: number; callFrame: { functionName: string; url: string } }[];
    samples: number[];
  };
  const hits = new Map<number, number>();
  for (const id of prof.samples) hits.set(id, (hits.get(id) ?? 0) + 1);
  const owner = (url: string, fn: string): string => {
    const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
    if (pkg) return pkg[1]!;
    if (url.includes("/shared/dist/")) return "@cgs/shared";
    if (url.includes("/services/sessions/")) return "sessions";
    if (url.includes("/gateway/dist/")) return "gateway";
    if (url.startsWith("node:")) return `node:${url.slice(5).split("/")[0]}`;
    return url === "" ? fn || "(native)" : url;
  };
  const totals = new Map<string, number>();
  for (const node of prof.nodes) {
    const n = hits.get(node.id);
    if (!n) continue;
    const key = owner(node.callFrame.url, node.callFrame.functionName);
    totals.set(key, (totals.get(key) ?? 0) + n);
  }
  return [...totals.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([key, n]) => `${((100 * n) / prof.samples.length).toFixed(1).padStart(5)} %  ${key}`);
}

async function pollBenchmark(): Promise<void> {
  const idp = await startTestIdentityProvider();
  const traces = await startOtlpReceiver();
  const db = await createTestDatabase("sessions_bench");
  const profileDir = mkdtempSync(path.join(os.tmpdir(), "cgs-sessions-bench-"));
  const sessionsUrl = await closedPortUrl();
  const gatewayUrl = await closedPortUrl();
  const nginxUrl = await closedPortUrl();
  const bareProxyUrl = await closedPortUrl();
  let nginxStarted = false;
  const common = {
    OIDC_ISSUER: idp.issuer,
    OIDC_AUDIENCE: idp.audience,
    OIDC_ALLOWED_AZP: TEST_ALLOWED_AZP_ENV,
    OIDC_JWKS_URL: idp.jwksUrl,
    LOG_LEVEL: "info",
    OTEL_EXPORTER_OTLP_ENDPOINT: traces.endpoint,
    OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
    OTEL_TRACES_SAMPLER_ARG: "0.1",
  };
  const children: ChildProcess[] = [];
  const gatewayRuntime = productionGateway();
  const gatewayCgroup = memoryCgroup(gatewayRuntime.memoryLimit, "sessions-gateway");
  try {
    const sessions = startProcess(
      "services/sessions",
      profile ? ["--cpu-prof", `--cpu-prof-dir=${path.join(profileDir, "sessions")}`] : [],
      {
        ...common,
        NODE_ENV: "production",
        OTEL_SERVICE_NAME: "sessions-bench",
        PORT: new URL(sessionsUrl).port,
        METRICS_PORT: "0",
        DATABASE_URL: db.url,
        PIN_HASH_SECRET: "bench-secret-0123456789",
        STREAMING_CREDENTIALS_KEY: Buffer.alloc(32, 7).toString("base64"),
        CLOUD_PROVIDER: "simulator",
        STREAMING_HOST: "simulator",
        PRIVATE_NETWORK: "simulator",
        CREATE_QUEUES: "true",
        QUEUE_NAME_PREFIX: `bench-${randomUUID().slice(0, 8)}-`,
        AWS_ENDPOINT_URL: process.env.AWS_ENDPOINT_URL || "http://127.0.0.1:5000",
        AWS_ACCESS_KEY_ID: process.env.AWS_ACCESS_KEY_ID || "test",
        AWS_SECRET_ACCESS_KEY: process.env.AWS_SECRET_ACCESS_KEY || "test",
        SESSION_ACTIVITY_GRANULARITY_MS: "30000",
        RECONCILER_INTERVAL_MS: "600000",
      },
    );
    children.push(sessions);
    await waitAnswering(`${sessionsUrl}/readyz`, sessions);
    // The gateway as production runs it: the images' Node, the prod chart's NODE_OPTIONS and memory limit.
    const gateway = startProcess(
      "gateway",
      profile ? ["--cpu-prof", `--cpu-prof-dir=${path.join(profileDir, "gateway")}`] : [],
      {
        ...common,
        NODE_OPTIONS: gatewayRuntime.nodeOptions,
        // development: the gateway's production-only secrets (portal cookies) are irrelevant here.
        NODE_ENV: "development",
        OTEL_SERVICE_NAME: "gateway-bench",
        PORT: new URL(gatewayUrl).port,
        METRICS_PORT: "0",
        SESSIONS_URL: sessionsUrl,
        // Limits stay on (every poll counts in Redis) but high enough that the run measures the path.
        RATE_LIMIT_POLL: "1000000000",
        REDIS_URL: process.env.REDIS_URL || "redis://127.0.0.1:6379",
      },
      { nodeBin: GATEWAY_NODE, cgroup: gatewayCgroup },
    );
    children.push(gateway);
    await waitAnswering(`${gatewayUrl}/readyz`, gateway);
    // The two proxies with no check at all, in front of the same service: what any proxy (nginx) and any Node proxy
    // built like the gateway (node:http and its undici pool, on its runtime) cost a poll on this machine.
    startNginx(profileDir, Number(new URL(nginxUrl).port), Number(new URL(sessionsUrl).port));
    nginxStarted = true;
    await waitAnswering(`${nginxUrl}/readyz`, sessions);
    const bareProxy = startBareProxy(Number(new URL(bareProxyUrl).port), sessionsUrl);
    children.push(bareProxy);
    await waitAnswering(`${bareProxyUrl}/readyz`, bareProxy);

    // Every account has a running, ready session, so each poll reads a real row.
    const accounts = Array.from({ length: ACCOUNTS }, (_, i) => `bench-${i}-${randomUUID().slice(0, 8)}`);
    const opened = await openDatabase({ url: db.url, schema, migrationsFolder, pool: { max: 2 } });
    await opened.db.insert(sessionsTable).values(
      accounts.map((accountId, i) => ({
        id: randomUUID(),
        accountId,
        state: "running" as const,
        region: "us-east-1",
        instanceId: `i-bench${i}`,
        publicIp: "198.18.0.1",
        privateNetIp: "100.64.0.1",
        ready: true,
        ratePerMinute: 10,
        currency: "USD",
        idleTimeoutMinutes: 15,
        startedAt: new Date(),
      })),
    );
    await opened.close();
    const tokens = await Promise.all(accounts.map((sub) => idp.sign({ sub })));
    const url = (base: string) => `${base}/api/v1/sessions/poll`;
    const probe = await fetch(url(gatewayUrl), { headers: { authorization: `Bearer ${tokens[0]}` } });
    if (probe.status !== 200) throw new Error(`gateway answered ${probe.status}: ${await probe.text()}`);

    // Warm-up (JIT, connection pools, the JWKS), then each path in turn.
    await runWrk({ url: url(gatewayUrl), tokens, seconds: 2 });
    await runWrk({ url: url(nginxUrl), tokens, seconds: 1 });
    await runWrk({ url: url(bareProxyUrl), tokens, seconds: 1 });
    // Where each poll's CPU goes: the service, the proxy in front of it, PostgreSQL (every backend), and the
    // machine as a whole.
    const groups = {
      sessions: [sessions.pid!],
      gateway: [gateway.pid!],
      nginx: () => nginxPids(profileDir),
      "bare proxy": [bareProxy.pid!],
      postgres: () => pidsNamed("postgres"),
    };
    const poll = (base: string) =>
      cpuDuring(groups, () => runWrk({ url: url(base), tokens, seconds: POLL_SECONDS }));
    const [direct, directCpu] = await poll(sessionsUrl);
    const [viaGateway, viaGatewayCpu] = await poll(gatewayUrl);
    const [viaNginx, viaNginxCpu] = await poll(nginxUrl);
    const [viaBareProxy, viaBareProxyCpu] = await poll(bareProxyUrl);
    const single = await runWrk({
      url: url(sessionsUrl),
      tokens,
      seconds: POLL_SECONDS / 2,
      connections: 1,
      threads: 1,
    });
    const failures =
      direct.failures + viaGateway.failures + viaNginx.failures + viaBareProxy.failures + single.failures;
    if (failures > 0) console.warn(`${failures} polls failed: these figures are not clean`);

    const directBase = `direct ${rps(direct)}; ${latency(direct)}`;
    // What a proxy adds to a poll beside all a direct poll costs the machine: on a machine its cores bind, through
    // the proxy can reach at best 1 / (1 + this) of direct.
    const directPollUs = usPerPoll(directCpu.machineSeconds, direct);
    const proxyShare = (proxy: string, spent: CpuSpent, load: LoadResult) => ({
      baseline: `a poll straight to the service, whole machine ${formatNumber(directPollUs)} µs`,
      ratio: `${proxy} ${fmt(usPerPoll(spent.seconds[proxy]!, load) / directPollUs, 2)}×`,
    });
    const rows: BenchRow[] = [
      {
        name: "poll through the gateway (100 accounts, 32 connections)",
        value: `${rps(viaGateway)}; ${latency(viaGateway)}`,
        baseline: directBase,
        ratio: `${fmt(viaGateway.rps / direct.rps, 2)}×`,
        target: "≥ 0.8× direct",
      },
      {
        name: "poll through nginx (a plain proxy_pass, no checks)",
        value: `${rps(viaNginx)}; ${latency(viaNginx)}`,
        baseline: directBase,
        ratio: `${fmt(viaNginx.rps / direct.rps, 2)}×`,
      },
      {
        name: "poll through the bare Node proxy (node:http, the gateway's undici pool and Node, no checks)",
        value: `${rps(viaBareProxy)}; ${latency(viaBareProxy)}`,
        baseline: directBase,
        ratio: `${fmt(viaBareProxy.rps / direct.rps, 2)}×`,
      },
      {
        name: "poll straight to the service (100 accounts, 32 connections)",
        value: rps(direct),
        baseline: BEFORE_ISSUE_13_DIRECT_RPS
          ? `before issue 13 ${formatNumber(BEFORE_ISSUE_13_DIRECT_RPS)} req/s (recorded)`
          : undefined,
        ratio: BEFORE_ISSUE_13_DIRECT_RPS ? `${fmt(direct.rps / BEFORE_ISSUE_13_DIRECT_RPS, 2)}×` : undefined,
        target: "≥ 4× before issue 13",
      },
      {
        name: "poll straight to the service, one connection",
        value: `${rps(single)}; ${latency(single)}`,
      },
      {
        name: "CPU per poll straight to the service (per process, then every process and the kernel)",
        value: cpuPerPoll(directCpu, direct, ["sessions", "postgres"]),
      },
      {
        name: "CPU per poll through the gateway (per process, then every process and the kernel)",
        value: cpuPerPoll(viaGatewayCpu, viaGateway, ["gateway", "sessions", "postgres"]),
        ...proxyShare("gateway", viaGatewayCpu, viaGateway),
      },
      {
        name: "CPU per poll through nginx",
        value: cpuPerPoll(viaNginxCpu, viaNginx, ["nginx", "sessions", "postgres"]),
        ...proxyShare("nginx", viaNginxCpu, viaNginx),
      },
      {
        name: "CPU per poll through the bare Node proxy",
        value: cpuPerPoll(viaBareProxyCpu, viaBareProxy, ["bare proxy", "sessions", "postgres"]),
        ...proxyShare("bare proxy", viaBareProxyCpu, viaBareProxy),
      },
    ];
    reportRows(
      `Sessions: poll (wrk -t2 -c32, telemetry at 10 %, PostgreSQL; the service on Node v${process.versions.node}, the gateway on Node ${nodeVersion(GATEWAY_NODE)}${gatewayCgroup ? ` in a ${gatewayRuntime.memoryLimit} memory cgroup` : ""}, NODE_OPTIONS ${gatewayRuntime.nodeOptions || "none"})`,
      rows,
    );

    if (profile) {
      for (const [name, child] of [
        ["sessions", sessions],
        ["gateway", gateway],
      ] as const) {
        await stopChild(child);
        const dir = path.join(profileDir, name);
        const file = readdirSync(dir).find((f) => f.endsWith(".cpuprofile"));
        if (!file) continue;
        console.log(`\n${name} CPU profile (${path.join(dir, file)}), self time by package:`);
        for (const line of selfTimeByPackage(path.join(dir, file))) console.log(`  ${line}`);
      }
    }
  } finally {
    await Promise.all(children.map((child) => stopChild(child)));
    if (nginxStarted) stopNginx(profileDir);
    if (gatewayCgroup) rmdirSync(gatewayCgroup);
    await db.drop();
    await traces.close();
    await idp.close();
    if (!profile) rmSync(profileDir, { recursive: true, force: true });
  }
}

async function seedFleet(h: SessionsHarness, size: number): Promise<void> {
  await h.database.db.delete(sessionsTable);
  const rows = [];
  for (let i = 0; i < size; i += 1) {
    const id = randomUUID();
    const accountId = `fleet-${i}-${id.slice(0, 6)}`;
    const { instanceId } = await h.cloud.launchInstance({
      accountId,
      sessionId: id,
      availabilityZone: "us-east-1a",
    });
    rows.push({
      id,
      accountId,
      state: "starting" as const,
      region: "us-east-1",
      instanceId,
      ratePerMinute: 10,
      currency: "USD",
      idleTimeoutMinutes: 15,
      startedAt: new Date(),
    });
  }
  for (let i = 0; i < rows.length; i += 1000)
    await h.database.db.insert(sessionsTable).values(rows.slice(i, i + 1000));
}

async function reconcilerBenchmark(h: SessionsHarness): Promise<void> {
  const batchSize = h.config.RECONCILER_BATCH_SIZE;
  const rows: BenchRow[] = [];
  for (const size of FLEETS) {
    await seedFleet(h, size);
    const reconciler = new Reconciler(h.deps, {
      batchSize,
      leaseMs: 60_000,
      startTimeoutMs: 600_000,
      describeGraceMs: 30_000,
    });
    for (const pass of ["starting → running + ready", "steady (nothing changes)"]) {
      let ticks = 0;
      let calls = 0;
      let ms = 0;
      let visited = 0;
      while (visited < size) {
        const report = await reconciler.tick();
        ticks += 1;
        calls += report.cloudCalls;
        ms += report.durationMs;
        visited += report.claimed;
        if (report.claimed === 0) break;
      }
      rows.push({
        name: `reconciler, ${formatNumber(size)} active sessions, ${pass}`,
        value: `${formatNumber(ms / ticks)} ms/tick, ${fmt(calls / ticks)} cloud calls/tick (${ticks} ticks)`,
        target: "cloud calls ≈ sessions / 200, never one per session",
      });
    }
  }
  reportRows(
    `Sessions: reconciler on the simulator (claim batch ${batchSize}, describe page ${h.config.SIMULATOR_PAGE_SIZE})`,
    rows,
  );
}

async function main(): Promise<void> {
  await pollBenchmark();
  if (process.argv.includes("--poll-only")) return;
  const h = await startSessionsHarness({ db: "postgres", contractCheck: false });
  try {
    await reconcilerBenchmark(h);
  } finally {
    await h.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
