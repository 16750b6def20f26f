/**
 * Gateway benchmark: prints numbers beside their baseline (reportRows), asserts nothing.
 *   npx tsc -b gateway && npx tsx --tsconfig tsconfig.test.json gateway/bench/gateway-bench.ts [--quick] [--profile] [--no-soak]
 *
 * One fixed-body upstream (a bare Node server answering the poll body) is measured three ways in the same run,
 * with wrk (-t2 -c32, bearer header): called directly, through nginx (Debian's, started here with a plain
 * proxy_pass and an upstream keepalive pool), and through the gateway's built process with every check on (JWT
 * signature against the IdP's JWKS, per-account limits in Redis, request validation, telemetry at the sampling
 * ratio below). The same gateway without the telemetry preload gives the telemetry cost. This machine's speed
 * drifts by tens of percent within minutes, so the targets are measured in turn, round after round (3 rounds, 2 with
 * --quick), and each row is the median round, with the spread of the rounds beside it. The gateway's resident
 * size is sampled during its runs, and a soak (5 min at full load, 30 s with --quick, skipped with --no-soak)
 * samples it every 10 s. The gateway's and nginx's CPU per request are also measured at 2 and 8 connections, where
 * fewer requests share each wake-up of the process. The gateway runs on BENCH_GATEWAY_NODE (npm run bench passes the images' Node 24) and once
 * more on this script's Node for comparison. With --profile the gateway runs under `node --cpu-prof` and the profile's top
 * self-time functions are printed.
 * Needs nginx and wrk (`apt-get install nginx-light wrk`; test/run-benchmarks.sh installs them) and Redis.
 */
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmdirSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { startTestIdentityProvider } from "@cgs/shared/testing/tokens";
import { startOtlpReceiver } from "@cgs/shared/testing/tracing";
import {
  GATEWAY_NODE,
  memoryCgroup,
  nodeVersion,
  productionGateway,
  spawnNode,
} from "../../test/bench/production-gateway";
import { cpuDuring, usPerRequest } from "../../test/bench/process-cpu";
import { nginxPids, startBareProxy, startNginx, stopNginx } from "../../test/bench/proxies";
import { waitAnswering, stopChild } from "../../test/bench/processes";
import { formatNumber, reportRows } from "../../test/bench/results";
import { runWrk, type LoadResult } from "../../test/bench/wrk";
import { closedPortUrl, connectRedis } from "../../test/harnesses/gateway-harness";

const root = path.resolve(__dirname, "..", "..");
const quick = process.argv.includes("--quick");
const profile = process.argv.includes("--profile");
const soak = !process.argv.includes("--no-soak");
const SECONDS = quick ? 4 : 10;
/** Rounds of the side-by-side measurement (each target once per round, in turn); rows show the median round. */
const ROUNDS = quick ? 2 : 3;
const SOAK_SECONDS = quick ? 30 : 300;
const RSS_EVERY_MS = 10_000;
const CONNECTIONS = 32;
/** Lighter loads the gateway's CPU per request is also measured at (beside nginx's). */
const FEWER_CONNECTIONS = [2, 8];
/** The production sampling ratio the chart sets (parent-based, 10 % of new traces). */
const SAMPLER_ARG = process.env.BENCH_SAMPLER_ARG ?? "0.1";
const REDIS_URL = process.env.REDIS_URL || "redis://127.0.0.1:6379";

const POLL_BODY = JSON.stringify({
  state: "running",
  instanceId: "i-0123456789abcdef0",
  publicIp: "198.18.0.1",
  privateNetIp: "100.64.0.1",
  startedAt: "2026-01-01T00:00:00.000Z",
  ready: true,
  message: null,
});

/** wrk (-t2, CONNECTIONS unless told) with the bench's one token in a header. */
const wrk = (url: string, token: string, seconds = SECONDS, connections = CONNECTIONS): Promise<LoadResult> =>
  runWrk({ url, tokens: [token], seconds, connections });

/** The run with the median of `key` (the upper one of an even count). */
function medianRun<T>(runs: T[], key: (run: T) => number = (run) => (run as LoadResult).rps): T {
  return [...runs].sort((a, b) => key(a) - key(b))[Math.floor(runs.length / 2)]!;
}

/** Samples a process's RSS every `everyMs` while `work` runs. */
async function sampleRss<T>(
  pid: number,
  everyMs: number,
  work: () => Promise<T>,
): Promise<{ result: T; rss: number[] }> {
  const rss = [rssMb(pid)];
  const timer = setInterval(() => rss.push(rssMb(pid)), everyMs);
  try {
    const result = await work();
    rss.push(rssMb(pid));
    return { result, rss };
  } finally {
    clearInterval(timer);
  }
}

function startNode(
  args: string[],
  env: Record<string, string>,
  cwd = root,
  nodeBin = process.execPath,
  cgroup?: string,
): ChildProcess {
  return spawnNode(nodeBin, args, { cwd, env: { ...process.env, ...env } }, cgroup);
}

/** CPU time the processes spend per request of `work`'s wrk run, in µs: robust to other load on the machine. */
async function cpuPerRequest(pids: number[], work: () => Promise<LoadResult>): Promise<[LoadResult, number]> {
  const [result, spent] = await cpuDuring({ proxy: pids }, work);
  return [result, usPerRequest(spent.seconds.proxy!, result.requests)];
}

function rssMb(pid: number): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN) / 1024;
  } catch {
    return NaN;
  }
}

/** The profile's functions by self time, top n. */
function topSelfTime(profileFile: string, n = 15): string[] {
  const prof = JSON.parse(readFileSync(profileFile, "utf8")) as {
    nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number } }[];
    samples: number[];
  };
  const counts = new Map<number, number>();
  for (const id of prof.samples) counts.set(id, (counts.get(id) ?? 0) + 1);
  const byFrame = new Map<string, number>();
  for (const node of prof.nodes) {
    const c = counts.get(node.id) ?? 0;
    if (!c) continue;
    const url = node.callFrame.url.replace(/^.*node_modules\//, "").replace(root, "");
    const key = `${node.callFrame.functionName || "(anonymous)"} ${url}:${node.callFrame.lineNumber + 1}`;
    byFrame.set(key, (byFrame.get(key) ?? 0) + c);
  }
  const total = prof.samples.length;
  return [...byFrame.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, c]) => `${((100 * c) / total).toFixed(1).padStart(5)} %  ${k}`);
}

function startGateway(
  url: string,
  upstreamUrl: string,
  idp: { issuer: string; audience: string; jwksUrl: string },
  otlpEndpoint: string,
  options: {
    telemetry: boolean;
    cpuProfileDir?: string;
    nodeBin?: string;
    cgroup?: string;
    nodeOptions: string;
  },
): ChildProcess {
  return startNode(
    [
      ...(options.cpuProfileDir ? ["--cpu-prof", `--cpu-prof-dir=${options.cpuProfileDir}`] : []),
      ...(options.telemetry ? ["--import", "@cgs/shared/dist/telemetry.js"] : []),
      "dist/main.js",
    ],
    {
      NODE_OPTIONS: options.nodeOptions,
      PORT: new URL(url).port,
      METRICS_PORT: "0",
      NODE_ENV: "development",
      LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? "info",
      OIDC_ISSUER: idp.issuer,
      OIDC_AUDIENCE: idp.audience,
      OIDC_JWKS_URL: idp.jwksUrl,
      SESSIONS_URL: upstreamUrl,
      BILLING_URL: upstreamUrl,
      ACCOUNTS_URL: upstreamUrl,
      AUTH_PROXY_URL: upstreamUrl,
      // Limits stay on (every request counts in Redis) but high enough that the run measures the gateway.
      RATE_LIMIT_POLL: "1000000000",
      REDIS_URL,
      OTEL_SERVICE_NAME: "gateway-bench",
      OTEL_EXPORTER_OTLP_ENDPOINT: otlpEndpoint,
      OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
      OTEL_TRACES_SAMPLER_ARG: SAMPLER_ARG,
    },
    path.join(root, "gateway"),
    options.nodeBin ?? GATEWAY_NODE,
    options.cgroup,
  );
}

/** Without Redis the gateway would count limits locally: the run would measure another path, so it stops here. */
async function requireRedis(): Promise<void> {
  const client = await connectRedis(REDIS_URL);
  try {
    await client.ping();
  } finally {
    await client.quit();
  }
}

async function main(): Promise<void> {
  await requireRedis();
  const idp = await startTestIdentityProvider();
  const traces = await startOtlpReceiver();
  const dir = mkdtempSync(path.join(os.tmpdir(), "cgs-gateway-bench-"));
  const upstreamUrl = await closedPortUrl();
  const nginxUrl = await closedPortUrl();
  const gatewayUrl = await closedPortUrl();
  const plainGatewayUrl = await closedPortUrl();
  const localGatewayUrl = await closedPortUrl();
  let localGateway: ChildProcess | undefined;
  let upstream: ChildProcess | undefined;
  let bareProxy: ChildProcess | undefined;
  const bareProxyUrl = await closedPortUrl();
  let gateway: ChildProcess | undefined;
  let plainGateway: ChildProcess | undefined;
  let nginxStarted = false;
  const path_ = "/api/v1/sessions/poll";
  const { memoryLimit, nodeOptions } = productionGateway();
  // One group per gateway process, each with the pod's limit, as each pod has its own.
  const cgroup = memoryCgroup(memoryLimit, "telemetry");
  const plainCgroup = cgroup && memoryCgroup(memoryLimit, "plain");
  try {
    upstream = startNode(
      [
        "-e",
        `const body=${JSON.stringify(POLL_BODY)};require("node:http").createServer((q,s)=>{q.resume();` +
          `s.writeHead(200,{"content-type":"application/json","content-length":Buffer.byteLength(body)});s.end(body)})` +
          `.listen(${new URL(upstreamUrl).port},"127.0.0.1")`,
      ],
      {},
    );
    await waitAnswering(upstreamUrl, upstream);
    startNginx(dir, Number(new URL(nginxUrl).port), Number(new URL(upstreamUrl).port));
    nginxStarted = true;
    await waitAnswering(nginxUrl);
    // Node's own HTTP server forwarding through the gateway's keep-alive client (undici), no check at all, on the
    // gateway's runtime: the ceiling any Node proxy built like the gateway reaches on this machine.
    bareProxy = startBareProxy(Number(new URL(bareProxyUrl).port), upstreamUrl);
    await waitAnswering(bareProxyUrl, bareProxy);

    gateway = startGateway(gatewayUrl, upstreamUrl, idp, traces.endpoint, {
      telemetry: true,
      cpuProfileDir: profile ? dir : undefined,
      cgroup,
      nodeOptions,
    });
    await waitAnswering(`${gatewayUrl}/api/v1/health`, gateway);
    const token = await idp.sign({ sub: `bench-${Date.now()}`, azp: "cgs-portal", typ: "Bearer" });
    const probe = await fetch(`${gatewayUrl}${path_}`, { headers: { authorization: `Bearer ${token}` } });
    if (probe.status !== 200) throw new Error(`gateway answered ${probe.status}: ${await probe.text()}`);
    // The same build without the telemetry preload: the difference is what telemetry costs.
    plainGateway = startGateway(plainGatewayUrl, upstreamUrl, idp, traces.endpoint, {
      telemetry: false,
      cgroup: plainCgroup,
      nodeOptions,
    });
    await waitAnswering(`${plainGatewayUrl}/api/v1/health`, plainGateway);
    // Warm-up: JIT, keep-alive pools, the JWKS.
    await wrk(`${gatewayUrl}${path_}`, token, 2);
    await wrk(`${plainGatewayUrl}${path_}`, token, 2);
    await wrk(`${bareProxyUrl}${path_}`, token, 2);

    // This machine's speed drifts by tens of percent within minutes, so one run of each would compare moments,
    // not proxies: every target is measured in each of ROUNDS rounds, in turn, and each row is the median round.
    const rounds = {
      direct: [] as LoadResult[],
      bare: [] as LoadResult[],
      nginx: [] as [LoadResult, number][],
      gateway: [] as [LoadResult, number][],
      plain: [] as LoadResult[],
    };
    const runRss: number[] = [];
    const plainRss: number[] = [];
    const pid = gateway.pid!;
    for (let round = 0; round < ROUNDS; round++) {
      rounds.direct.push(await wrk(`${upstreamUrl}${path_}`, token));
      rounds.bare.push(await wrk(`${bareProxyUrl}${path_}`, token));
      rounds.nginx.push(await cpuPerRequest(nginxPids(dir), () => wrk(`${nginxUrl}${path_}`, token)));
      const on = await sampleRss(pid, 250, () =>
        cpuPerRequest([pid], () => wrk(`${gatewayUrl}${path_}`, token)),
      );
      rounds.gateway.push(on.result);
      runRss.push(...on.rss);
      const off = await sampleRss(plainGateway.pid!, 250, () => wrk(`${plainGatewayUrl}${path_}`, token));
      rounds.plain.push(off.result);
      plainRss.push(...off.rss);
    }
    await stopChild(bareProxy);
    await stopChild(plainGateway);
    const direct = medianRun(rounds.direct);
    const viaBareProxy = medianRun(rounds.bare);
    const [viaNginx, nginxCpu] = medianRun(rounds.nginx, ([r]) => r.rps);
    const [viaGateway, gatewayCpu] = medianRun(rounds.gateway, ([r]) => r.rps);
    const noTelemetry = medianRun(rounds.plain);
    const spread = (runs: LoadResult[]) =>
      ROUNDS > 1
        ? ` (rounds ${formatNumber(Math.min(...runs.map((r) => r.rps)))}–${formatNumber(Math.max(...runs.map((r) => r.rps)))})`
        : "";
    // CPU a request costs at fewer connections: fewer requests share each wake-up of the event loop (its
    // syscalls, the Redis flush, timers), as on a service whose answers take milliseconds (the poll through the
    // gateway to sessions).
    const byConnections: { connections: number; gateway: number; nginx: number }[] = [];
    for (const connections of FEWER_CONNECTIONS) {
      const [, nginxAt] = await cpuPerRequest(nginxPids(dir), () =>
        wrk(`${nginxUrl}${path_}`, token, SECONDS, connections),
      );
      const [, gatewayAt] = await cpuPerRequest([pid], () =>
        wrk(`${gatewayUrl}${path_}`, token, SECONDS, connections),
      );
      byConnections.push({ connections, gateway: gatewayAt, nginx: nginxAt });
    }
    const soaked = soak
      ? await sampleRss(pid, RSS_EVERY_MS, () => wrk(`${gatewayUrl}${path_}`, token, SOAK_SECONDS))
      : undefined;

    if (profile) {
      await stopChild(gateway);
      const file = readdirSync(dir).find((f) => f.endsWith(".cpuprofile"));
      if (file) {
        console.log(`gateway CPU profile (${path.join(dir, file)}), top self time:`);
        for (const line of topSelfTime(path.join(dir, file))) console.log(`  ${line}`);
      } else {
        console.log(
          "no gateway CPU profile: node writes it on exit, and the gateway did not exit on SIGTERM",
        );
      }
    } else {
      await stopChild(gateway);
    }

    // The same build, every check and telemetry on, on the Node that runs this script (the machine's).
    let onLocalNode: LoadResult | undefined;
    if (GATEWAY_NODE !== process.execPath) {
      localGateway = startGateway(localGatewayUrl, upstreamUrl, idp, traces.endpoint, {
        telemetry: true,
        nodeBin: process.execPath,
        cgroup,
        nodeOptions,
      });
      await waitAnswering(`${localGatewayUrl}/api/v1/health`, localGateway);
      await wrk(`${localGatewayUrl}${path_}`, token, 2);
      onLocalNode = await wrk(`${localGatewayUrl}${path_}`, token);
    }

    const rps = (r: LoadResult) => `${formatNumber(r.rps)} req/s`;
    const lat = (r: LoadResult) => `p50 ${formatNumber(r.p50ms, 2)} ms, p99 ${formatNumber(r.p99ms, 2)} ms`;
    const errors = (r: LoadResult) => (r.failures ? `, ${r.failures} failed` : "");
    const nginxBase = `nginx ${rps(viaNginx)}`;
    const peak = (xs: number[]) => Math.max(...xs.filter(Number.isFinite));
    reportRows(
      `Gateway on Node ${nodeVersion(GATEWAY_NODE)} over a fixed-body upstream (wrk -t2 -c${CONNECTIONS} -d${SECONDS}s, median of ${ROUNDS} interleaved rounds, sampler parentbased_traceidratio ${SAMPLER_ARG}, ${cgroup ? `in a ${memoryLimit} memory cgroup, the prod chart's limit` : "no memory limit: this machine allows no memory cgroup"}, NODE_OPTIONS ${nodeOptions || "none"})`,
      [
        {
          name: "upstream direct",
          value: `${rps(direct)}, ${lat(direct)}`,
          baseline: nginxBase,
          ratio: `${formatNumber(direct.rps / viaNginx.rps, 2)}×`,
        },
        {
          name: "nginx → upstream (baseline)",
          value: `${rps(viaNginx)}, ${lat(viaNginx)}${errors(viaNginx)}${spread(rounds.nginx.map(([r]) => r))}`,
        },
        {
          name: "bare Node proxy → upstream (node:http server, the gateway's undici keep-alive pool, no checks)",
          value: `${rps(viaBareProxy)}, ${lat(viaBareProxy)}${errors(viaBareProxy)}${spread(rounds.bare)}`,
          baseline: nginxBase,
          ratio: `${formatNumber(viaBareProxy.rps / viaNginx.rps, 3)}×`,
        },
        {
          name: "gateway → upstream (all checks, telemetry on)",
          value: `${rps(viaGateway)}${errors(viaGateway)}${spread(rounds.gateway.map(([r]) => r))}`,
          baseline: nginxBase,
          ratio: `${formatNumber(viaGateway.rps / viaNginx.rps, 3)}×`,
          target: "≥ 0.20× nginx",
        },
        {
          name: "gateway beside the bare Node proxy",
          value: `${rps(viaGateway)}`,
          baseline: `bare Node proxy ${rps(viaBareProxy)}`,
          ratio: `${formatNumber(viaGateway.rps / viaBareProxy.rps, 2)}×`,
        },
        { name: "gateway p99 latency", value: lat(viaGateway), target: "p99 < 20 ms" },
        {
          name: "gateway CPU per request (telemetry on)",
          value: `${formatNumber(gatewayCpu)} µs`,
          baseline: `nginx ${formatNumber(nginxCpu)} µs`,
          ratio: `${formatNumber(gatewayCpu / nginxCpu, 1)}×`,
        },
        ...byConnections.map(({ connections, gateway: at, nginx: nginxAt }) => ({
          name: `gateway CPU per request at ${connections} connections (telemetry on)`,
          value: `${formatNumber(at)} µs (${formatNumber(at / gatewayCpu, 2)}× its CPU at ${CONNECTIONS})`,
          baseline: `nginx ${formatNumber(nginxAt)} µs`,
          ratio: `${formatNumber(at / nginxAt, 1)}×`,
        })),
        ...(onLocalNode
          ? [
              {
                name: `the same gateway on this machine's Node ${process.version} (telemetry on)`,
                value: `${rps(onLocalNode)}, ${lat(onLocalNode)}${errors(onLocalNode)}`,
                baseline: nginxBase,
                ratio: `${formatNumber(onLocalNode.rps / viaNginx.rps, 3)}×`,
              },
            ]
          : []),
        {
          name: "gateway with telemetry off (no preload)",
          value: `${rps(noTelemetry)}, ${lat(noTelemetry)}${errors(noTelemetry)}${spread(rounds.plain)}`,
          baseline: nginxBase,
          ratio: `${formatNumber(noTelemetry.rps / viaNginx.rps, 3)}×`,
        },
        {
          name: "telemetry cost (on vs off)",
          value: `${formatNumber(100 * (1 - viaGateway.rps / noTelemetry.rps), 1)} % fewer req/s`,
          baseline: `telemetry off ${rps(noTelemetry)}`,
          ratio: `${formatNumber(viaGateway.rps / noTelemetry.rps, 2)}×`,
          target: "≤ 15 %",
        },
        {
          name: "gateway peak RSS during its runs",
          value: `${formatNumber(peak([...runRss, ...plainRss, ...(soaked?.rss ?? [])]), 1)} MB`,
          target: "< 200 MB",
        },
        ...(soaked
          ? [
              {
                name: `soak: ${SOAK_SECONDS} s at full load, RSS every ${RSS_EVERY_MS / 1000} s`,
                value: `first ${formatNumber(soaked.rss[0]!, 1)} MB, last ${formatNumber(soaked.rss.at(-1)!, 1)} MB, peak ${formatNumber(peak(soaked.rss), 1)} MB`,
                baseline: `${rps(soaked.result)}${errors(soaked.result)}`,
                ratio: `last/first ${formatNumber(soaked.rss.at(-1)! / soaked.rss[0]!, 2)}×`,
                target: "no growth, < 200 MB",
              },
            ]
          : []),
      ],
    );
  } finally {
    await stopChild(gateway);
    await stopChild(plainGateway);
    await stopChild(localGateway);
    await stopChild(bareProxy);
    await stopChild(upstream);
    if (nginxStarted) stopNginx(dir);
    for (const group of [cgroup, plainCgroup]) if (group) rmdirSync(group);
    await traces.close();
    await idp.close();
    if (!profile) rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
