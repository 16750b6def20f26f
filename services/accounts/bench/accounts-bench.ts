// Accounts benchmark on the real PostgreSQL of TEST_DATABASE_URL: settings reads and merge patches over HTTP
// (many accounts, concurrent clients), and one deletion-sweep pass purging N due accounts (outbox included).
//   npx tsc -b shared && npx tsx --tsconfig tsconfig.test.json services/accounts/bench/accounts-bench.ts
// Options (env): BENCH_REQUESTS (default 4000), BENCH_CONCURRENCY (16), BENCH_ACCOUNTS (500), BENCH_PURGE ("100,2000").
import path from "node:path";
import pino from "pino";
import { loadConfig, startServer, type IdentityAdmin } from "@cgs/shared";
import { createTestDatabase } from "@cgs/shared/testing/db";
import { startTestIdentityProvider, testVerifier } from "@cgs/shared/testing/tokens";
import { openDatabase } from "@cgs/shared";
import { buildAccounts } from "../src/composition";
import { accountsConfigSchema } from "../src/config";
import { AccountRepository } from "../src/data/account-repository";
import * as schema from "../src/data/schema";
import { createOutboxPublisher, DAY_MS } from "@cgs/shared";
import { createDeletionSweep } from "../src/domain/deletion-sweep";

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 4_000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const ACCOUNTS = Number(process.env.BENCH_ACCOUNTS ?? 500);
const PURGE_COUNTS = (process.env.BENCH_PURGE ?? "100,2000").split(",").map(Number);
const logger = pino({ level: "silent" });

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;

async function load(label: string, total: number, one: (i: number) => Promise<Response>): Promise<void> {
  const latencies: number[] = [];
  let next = 0;
  let failures = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      for (let i = next++; i < total; i = next++) {
        const t = performance.now();
        const res = await one(i);
        await res.arrayBuffer();
        if (!res.ok) failures += 1;
        latencies.push(performance.now() - t);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  console.log(
    `${label.padEnd(34)} ${String(Math.round(total / seconds)).padStart(6)} req/s  p50 ${percentile(latencies, 0.5).toFixed(1)} ms  p99 ${percentile(latencies, 0.99).toFixed(1)} ms  failures ${failures}`,
  );
}

async function main(): Promise<void> {
  const created = await createTestDatabase("accounts_bench");
  const database = await openDatabase({
    url: created.url,
    schema,
    migrationsFolder: path.join(__dirname, "..", "drizzle"),
    pool: { max: 20 },
  });
  const idp = await startTestIdentityProvider();
  const config = loadConfig(accountsConfigSchema, { LOG_LEVEL: "silent" });
  const clock = { current: new Date(), now: () => new Date(clock.current) };
  const { app } = buildAccounts(
    {
      config,
      logger,
      database,
      verifier: testVerifier(idp),
    },
    { clock },
  );
  const server = await startServer(app, { port: 0, logger, shutdownGraceMs: 500 });
  try {
    const tokens = await Promise.all(
      Array.from({ length: ACCOUNTS }, (_, i) => idp.sign({ sub: `bench-${i}` })),
    );
    const auth = (i: number) => ({ authorization: `Bearer ${tokens[i % ACCOUNTS]}` });
    console.log(`accounts bench: ${REQUESTS} requests, concurrency ${CONCURRENCY}, ${ACCOUNTS} accounts`);
    await load("GET /api/v1/settings (first touch)", ACCOUNTS, (i) =>
      fetch(`${server.url}/api/v1/settings`, { headers: auth(i) }),
    );
    await load("GET /api/v1/settings", REQUESTS, (i) =>
      fetch(`${server.url}/api/v1/settings`, { headers: auth(i) }),
    );
    await load("PATCH /api/v1/settings", REQUESTS, (i) =>
      fetch(`${server.url}/api/v1/settings`, {
        method: "PATCH",
        headers: { ...auth(i), "content-type": "application/merge-patch+json" },
        body: JSON.stringify({ fps: [30, 60, 120][i % 3], bitrateKbps: 2_000 + i }),
      }),
    );
    await load("GET /internal/v1/accounts/me", REQUESTS, (i) =>
      fetch(`${server.url}/internal/v1/accounts/me`, { headers: auth(i) }),
    );

    const identity: IdentityAdmin = {
      findUserByEmail: async () => null,
      passwordSetAt: async () => null,
      setPassword: async () => undefined,
      clearLoginFailures: async () => undefined,
      disableUser: async () => undefined,
    };
    const repo = new AccountRepository(database.db);
    for (const count of PURGE_COUNTS) {
      const now = new Date();
      for (let i = 0; i < count; i += 1) {
        const id = `purge-${count}-${i}`;
        await repo.createIfAbsent(id, null, now);
        await repo.scheduleDeletion(id, now, now);
      }
      clock.current = new Date(now.getTime() + DAY_MS);
      const sweep = createDeletionSweep({
        database,
        accounts: repo,
        identity,
        clock,
        logger,
        batchSize: 100,
        events: createOutboxPublisher("bench-"),
      });
      const t = performance.now();
      let purged = 0;
      let disabled = 0;
      for (;;) {
        const result = await sweep.runOnce();
        purged += result.purged.length;
        disabled += result.identitiesDisabled.length;
        if (result.purged.length === 0 && result.identitiesDisabled.length === 0) break;
      }
      const ms = performance.now() - t;
      console.log(
        `deletion sweep: ${purged} accounts purged (+${disabled} identities disabled) in ${ms.toFixed(0)} ms (${(ms / Math.max(1, purged)).toFixed(2)} ms/account)`,
      );
    }
  } finally {
    await server.stop();
    await idp.close();
    await database.close();
    await created.drop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
