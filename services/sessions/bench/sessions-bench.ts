/**
 * Sessions benchmark: prints numbers, asserts nothing.
 *   cd /work/main && npx tsc -b services/sessions gateway && \
 *     npx tsx --tsconfig tsconfig.test.json services/sessions/bench/sessions-bench.ts [--quick]
 * Needs PostgreSQL (TEST_DATABASE_URL, default postgres://cgs:cgs@127.0.0.1:5432/postgres) and moto for the
 * service's queue (AWS_ENDPOINT_URL, default http://127.0.0.1:5000).
 *
 * 1. Poll throughput and latency (p50/p99) through the gateway and straight to the service, for 1, 100 and
 *    1,000 concurrent accounts (each with a running session), and the gateway/direct ratio. The service and
 *    the gateway run as their built processes (dist/main.js), the load generator in this one.
 * 2. Reconciler cloud calls and wall time per tick at 10, 1,000 and 10,000 active sessions on the simulator.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { openDatabase } from "@cgs/shared";
import { createTestDatabase } from "@cgs/shared/testing/db";
import { startTestIdentityProvider, TEST_ALLOWED_AZP_ENV } from "@cgs/shared/testing/tokens";
import { closedPortUrl } from "../../../gateway/src/testing/gateway-harness";
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
const POLL_SECONDS = quick ? 2 : 5;
const CONCURRENCY = [1, 100, 1000];
const FLEETS = quick ? [10, 1000] : [10, 1000, 10000];

interface Measured {
  requests: number;
  errors: number;
  seconds: number;
  p50: number;
  p99: number;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

async function pollLoad(base: string, tokens: string[], seconds: number): Promise<Measured> {
  const latencies: number[] = [];
  let errors = 0;
  const began = performance.now();
  const deadline = began + seconds * 1000;
  await Promise.all(
    tokens.map(async (token) => {
      while (performance.now() < deadline) {
        const t0 = performance.now();
        try {
          const res = await fetch(`${base}/api/v1/sessions/poll`, {
            headers: { authorization: `Bearer ${token}` },
          });
          await res.arrayBuffer();
          if (res.status === 200) latencies.push(performance.now() - t0);
          else errors += 1;
        } catch {
          errors += 1;
        }
      }
    }),
  );
  const elapsed = (performance.now() - began) / 1000;
  latencies.sort((a, b) => a - b);
  return {
    requests: latencies.length,
    errors,
    seconds: elapsed,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
  };
}

const fmt = (n: number, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : "-");

function startProcess(dir: string, env: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, ["dist/main.js"], {
    cwd: path.join(root, dir),
    env: { ...process.env, ...env },
    stdio: ["ignore", "ignore", "inherit"],
  });
  return child;
}

async function waitReady(url: string, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`the process for ${url} exited with ${child.exitCode}`);
    try {
      if ((await fetch(`${url}/readyz`)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`${url} not ready`);
}

async function pollBenchmark(): Promise<void> {
  const idp = await startTestIdentityProvider();
  const db = await createTestDatabase("sessions_bench");
  const sessionsUrl = await closedPortUrl();
  const gatewayUrl = await closedPortUrl();
  const oidc = {
    OIDC_ISSUER: idp.issuer,
    OIDC_AUDIENCE: idp.audience,
    OIDC_ALLOWED_AZP: TEST_ALLOWED_AZP_ENV,
    OIDC_JWKS_URL: idp.jwksUrl,
    LOG_LEVEL: "silent",
    NODE_ENV: "production",
  };
  const children: ChildProcess[] = [];
  try {
    children.push(
      startProcess("services/sessions", {
        ...oidc,
        PORT: new URL(sessionsUrl).port,
        DATABASE_URL: db.url,
        PIN_HASH_SECRET: "bench-secret-0123456789",
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
      }),
    );
    await waitReady(sessionsUrl, children[0]!);
    children.push(
      startProcess("gateway", {
        ...oidc,
        PORT: new URL(gatewayUrl).port,
        // development: the gateway's production-only secrets (portal cookies) are irrelevant here.
        NODE_ENV: "development",
        SESSIONS_URL: sessionsUrl,
        RATE_LIMIT_POLL: "1000000000",
        REDIS_URL: "",
      }),
    );
    await waitReady(gatewayUrl, children[1]!);

    // Every account has a running, ready session, so each poll reads a real row.
    const accounts = Array.from({ length: Math.max(...CONCURRENCY) }, (_, i) => `bench-${i}`);
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

    console.log(
      `\nPoll: ${POLL_SECONDS} s per row; sessions and gateway as separate processes (log level silent),`,
    );
    console.log("PostgreSQL, pool of 10; load generator, gateway, service and database share 2 cores");
    console.log("concurrent accounts | target  | requests |   req/s | p50 ms | p99 ms | errors");
    const ratios: string[] = [];
    for (const c of CONCURRENCY) {
      const subset = tokens.slice(0, c);
      await pollLoad(gatewayUrl, subset, 0.5); // warm-up (JWKS fetch, connections)
      const direct = await pollLoad(sessionsUrl, subset, POLL_SECONDS);
      const viaGateway = await pollLoad(gatewayUrl, subset, POLL_SECONDS);
      for (const [name, m] of [
        ["direct", direct],
        ["gateway", viaGateway],
      ] as const) {
        console.log(
          `${String(c).padStart(19)} | ${name.padEnd(7)} | ${String(m.requests).padStart(8)} | ${fmt(m.requests / m.seconds).padStart(7)} | ${fmt(m.p50, 2).padStart(6)} | ${fmt(m.p99, 2).padStart(6)} | ${m.errors}`,
        );
      }
      const rps = viaGateway.requests / viaGateway.seconds / (direct.requests / direct.seconds);
      ratios.push(
        `${c} accounts: gateway/direct throughput ${fmt(rps, 2)}, p50 ${fmt(viaGateway.p50 / direct.p50, 2)}x, p99 ${fmt(viaGateway.p99 / direct.p99, 2)}x`,
      );
    }
    console.log(ratios.join("\n"));
  } finally {
    for (const child of children) child.kill("SIGTERM");
    await Promise.all(
      children.map(
        (child) =>
          new Promise((resolve) => (child.exitCode !== null ? resolve(null) : child.once("exit", resolve))),
      ),
    );
    await db.drop();
    await idp.close();
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
  console.log(
    `\nReconciler on the simulator (claim batch ${batchSize}, describe page ${h.config.SIMULATOR_PAGE_SIZE}, 200 session ids per tag filter as EC2 allows)`,
  );
  console.log(
    "active sessions | pass                        | ticks | cloud calls | calls/tick | ms/tick | ms/pass",
  );
  for (const size of FLEETS) {
    await seedFleet(h, size);
    const reconciler = new Reconciler(h.deps, {
      batchSize,
      leaseMs: 60_000,
      startTimeoutMs: 600_000,
      describeGraceMs: 30_000,
    });
    for (const pass of ["starting -> running + ready", "steady (nothing changes)"]) {
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
      console.log(
        `${String(size).padStart(15)} | ${pass.padEnd(27)} | ${String(ticks).padStart(5)} | ${String(calls).padStart(11)} | ${fmt(calls / ticks).padStart(10)} | ${fmt(ms / ticks).padStart(7)} | ${fmt(ms).padStart(7)}`,
      );
    }
  }
}

async function main(): Promise<void> {
  await pollBenchmark();
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
