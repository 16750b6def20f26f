// Billing benchmark: signed Stripe webhook events processed per second over HTTP, and the cost of one
// metering tick at 10, 1,000, 10,000 and 100,000 running sessions beside the per-session path measured in the
// same run, on the real PostgreSQL of TEST_DATABASE_URL. Rows go through reportRows (test/bench/results.ts).
//   npx tsc -b shared && npx tsx services/billing/bench/billing-bench.ts [--quick]
// Options (env): BENCH_WEBHOOK_EVENTS (default 2000), BENCH_CONCURRENCY (16), BENCH_SESSIONS ("10,1000,10000,100000").
import { fork } from "node:child_process";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { Client } from "pg";
import pino from "pino";
import Stripe from "stripe";
import { createJwtVerifier, loadConfig, oidcSettings, openDatabase, startServer } from "@cgs/shared";
import type { BillingContext } from "../src/app";
import { composeBilling } from "../src/composition";
import { billingConfigSchema } from "../src/config";
import * as schema from "../src/data/schema";
import { findLedgerMismatches } from "../src/data/wallet-repository";
import { meterRunningSessions } from "../src/domain/metering";
import { readWallet } from "../src/domain/wallets";
import { placeTopup } from "../src/testing/wallet-fixtures";
import { formatNumber, reportRows, type BenchRow } from "../../../test/bench/results";
import type { LoadReply, LoadRequest } from "./webhook-load";

const adminUrl = process.env.TEST_DATABASE_URL || "postgres://cgs:cgs@127.0.0.1:5432/postgres";
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const QUICK = process.argv.includes("--quick");
const WEBHOOK_EVENTS = Number(process.env.BENCH_WEBHOOK_EVENTS ?? (QUICK ? 300 : 2_000));
const SESSION_COUNTS = (process.env.BENCH_SESSIONS ?? (QUICK ? "10,1000" : "10,1000,10000,100000"))
  .split(",")
  .map(Number);
/**
 * Main before the group commit (2e42c71), measured with this bench (generator in a child process, wallets made
 * first) on the shared machine, median of three runs; not this run: the route no longer credits one by one.
 */
const BEFORE = { newPerSecond: 307, duplicatePerSecond: 1_594 };
const SECRET = "whsec_bench";
const MINUTE = 60_000;

async function admin(query: string): Promise<void> {
  const client = new Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(query);
  } finally {
    await client.end();
  }
}

/**
 * Without FORCE: after 100,000-row inserts an autovacuum worker may be in the database, and FORCE needs a
 * privilege to signal it that the test role lacks; a plain DROP stops autovacuum itself.
 */
async function dropDatabase(name: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await admin(`DROP DATABASE IF EXISTS "${name}"`);
      return;
    } catch (err) {
      if (attempt >= 10) throw err;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
}

async function main(): Promise<void> {
  const name = `billing_bench_${randomBytes(4).toString("hex")}`;
  await admin(`CREATE DATABASE "${name}"`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const database = await openDatabase({
    url: url.toString(),
    schema,
    migrationsFolder: path.join(__dirname, "..", "drizzle"),
    pool: { max: 20 },
  });
  const config = loadConfig(billingConfigSchema, {
    NODE_ENV: "test",
    LOG_LEVEL: "silent",
    DATABASE_URL: url.toString(),
    PAYMENT_PROVIDER: "stripe",
    STRIPE_WEBHOOK_SECRET: SECRET,
    STORAGE_DEFAULT_TIER: "none",
  });
  const logger = pino({ level: "silent" });
  const context: BillingContext = {
    config,
    logger,
    database,
    verifier: createJwtVerifier(oidcSettings(config)),
  };
  let now = new Date();
  const clock = () => now;
  const { app, deps } = composeBilling(context, { clock: { now: clock } });
  const server = await startServer(app, {
    port: 0,
    logger,
    shutdownGraceMs: 1_000,
  });
  const stripe = new Stripe("sk_test_bench");
  const rows: BenchRow[] = [];
  const lines: string[] = [];
  const say = (line: string) => {
    lines.push(line);
    process.stdout.write(`${line}\n`);
  };

  try {
    say(
      `billing benchmark (PostgreSQL ${new URL(adminUrl).host}, ${CONCURRENCY} concurrent webhook deliveries)`,
    );

    // ---- webhook throughput ----
    // Each checkout pays a top-up the platform created (anything else is only recorded for review).
    // POST /credits/topup creates the wallet before it opens the checkout, so every paid checkout finds one.
    for (let a = 0; a < Math.min(WEBHOOK_EVENTS, 200); a++) await readWallet(deps, `bench-account-${a}`);
    const payloads: string[] = [];
    for (let i = 0; i < WEBHOOK_EVENTS; i++) {
      const placed = await placeTopup(deps, `bench-account-${i % 200}`, 500 + (i % 100));
      payloads.push(JSON.stringify(placed.paid));
    }
    // The load generator runs in a child process (webhook-load.ts), so the figure is the server's throughput
    // and the CPU measured here is the server's own (its HTTP handling, signature checks and database client).
    const loader = fork(path.join(__dirname, "webhook-load.ts"), { stdio: "inherit" });
    const target = `${server.url}/api/v1/billing/stripe-webhook`;
    const deliverAll = async (): Promise<{
      perSecond: number;
      cpuMsPerEvent: number;
      loaderCpuMsPerEvent: number;
    }> => {
      const deliveries = payloads.map((payload) => ({
        payload,
        signature: stripe.webhooks.generateTestHeaderString({ payload, secret: SECRET }),
      }));
      const request: LoadRequest = { url: target, concurrency: CONCURRENCY, deliveries };
      const cpu = process.cpuUsage();
      const reply = await new Promise<LoadReply>((resolve, reject) => {
        loader.once("message", (m) => resolve(m as LoadReply));
        loader.once("exit", (code) => reject(new Error(`load generator exited (${code})`)));
        loader.send(request);
      });
      const used = process.cpuUsage(cpu);
      if (reply.failures > 0) {
        throw new Error(`${reply.failures} webhook deliveries failed: ${JSON.stringify(reply.statuses)}`);
      }
      return {
        perSecond: payloads.length / reply.seconds,
        cpuMsPerEvent: (used.user + used.system) / 1000 / payloads.length,
        loaderCpuMsPerEvent: reply.cpuMs / payloads.length,
      };
    };
    const cpuNote = (r: { cpuMsPerEvent: number; loaderCpuMsPerEvent: number }) =>
      `(server CPU ${r.cpuMsPerEvent.toFixed(2)} ms/event, load generator ${r.loaderCpuMsPerEvent.toFixed(2)})`;
    const { perSecond: fresh, ...freshCpu } = await deliverAll();
    say(
      `webhook: ${WEBHOOK_EVENTS} new paid checkout events     ${fresh.toFixed(0)} events/s ${cpuNote(freshCpu)}`,
    );
    const { perSecond: again, ...againCpu } = await deliverAll();
    say(
      `webhook: the same ${WEBHOOK_EVENTS} events redelivered    ${again.toFixed(0)} events/s ${cpuNote(againCpu)}`,
    );
    loader.disconnect();
    rows.push(
      {
        name: `Stripe webhook, new paid checkouts (${CONCURRENCY} concurrent)`,
        value: `${formatNumber(fresh)} events/s, server CPU ${formatNumber(freshCpu.cpuMsPerEvent, 2)} ms/event`,
        baseline: `main before: ${BEFORE.newPerSecond} events/s (2e42c71, median of 3, not this run)`,
        ratio: `${formatNumber(fresh / BEFORE.newPerSecond, 2)}×`,
        target: "≥ 1,000 events/s",
      },
      {
        name: `Stripe webhook, redelivered events (${CONCURRENCY} concurrent)`,
        value: `${formatNumber(again)} events/s, server CPU ${formatNumber(againCpu.cpuMsPerEvent, 2)} ms/event`,
        baseline: `main before: ${BEFORE.duplicatePerSecond} events/s (2e42c71, median of 3, not this run)`,
        ratio: `${formatNumber(again / BEFORE.duplicatePerSecond, 2)}×`,
        target: "≥ 3,000 events/s",
      },
    );
    const mismatches = await findLedgerMismatches(database.db);
    if (mismatches.length > 0) throw new Error(`ledger mismatch: ${JSON.stringify(mismatches.slice(0, 3))}`);

    // ---- metering tick ----
    /** Seeds `count` running sessions whose minute 1 is due (minute 0 paid), `perAccount` to a wallet; ticks once. */
    const tick = async (count: number, perAccount: number): Promise<number> => {
      await database.db.execute(sql`truncate metered_sessions, ledger_entries, wallets, holds`);
      const t0 = new Date(Date.UTC(2026, 10, 20, 10, 0, 0));
      const accounts = Math.ceil(count / perAccount);
      await database.db.execute(sql`
        insert into wallets (account_id, currency, balance, held, storage_tier)
        select 'acct-' || g, 'USD', 100000, 0, 'none' from generate_series(1, ${accounts}) g`);
      await database.db.execute(sql`
        insert into ledger_entries (account_id, kind, reference, amount, currency, balance_after)
        select 'acct-' || g, 'topup', 'topup:bench-' || g, 100000, 'USD', 100000 from generate_series(1, ${accounts}) g`);
      await database.db.execute(sql`
        insert into metered_sessions (session_id, account_id, rate_per_minute, currency, started_at, charged_minutes, next_minute_at)
        select 's-' || g, 'acct-' || (1 + (g - 1) / ${perAccount}), 10, 'USD', ${t0.toISOString()}::timestamptz, 1,
               ${t0.toISOString()}::timestamptz + interval '1 minute'
          from generate_series(1, ${count}) g`);
      await database.db.execute(sql`analyze`);
      now = new Date(t0.getTime() + MINUTE + 1_000);
      const began = performance.now();
      const pass = await meterRunningSessions(deps);
      const ms = performance.now() - began;
      if (pass.sessions !== count)
        throw new Error(`expected ${count} sessions charged, got ${pass.sessions}`);
      const mismatches = await findLedgerMismatches(database.db);
      if (mismatches.length > 0) throw new Error(`ledger mismatch after the tick at ${count}`);
      return ms;
    };
    // Baseline in the same run: the per-session path (two sessions share each wallet, so none is set-based).
    const baselineCount = QUICK ? 200 : 1_000;
    const perSessionMs = (await tick(baselineCount, 2)) / baselineCount;
    say(
      `metering: per-session path ${(perSessionMs * 1000).toFixed(0)} µs/session (${baselineCount} sessions)`,
    );
    const targets: Record<number, string> = { 10_000: "< 1 s", 100_000: "< 10 s" };
    for (const count of SESSION_COUNTS) {
      const ms = await tick(count, 1);
      say(`metering: ${String(count).padStart(6)} running sessions   tick ${ms.toFixed(1).padStart(8)} ms`);
      rows.push({
        name: `metering tick, ${formatNumber(count)} running sessions`,
        value: `${formatNumber(ms / 1000, 3)} s`,
        baseline: `per-session path ${formatNumber((perSessionMs * count) / 1000, 3)} s (${formatNumber(perSessionMs * 1000)} µs/session × ${formatNumber(count)})`,
        ratio: `${formatNumber((perSessionMs * count) / ms, 1)}× faster`,
        target: targets[count] ?? "—",
      });
    }
    reportRows("Billing: metering and Stripe webhooks", rows);
  } finally {
    await server.stop();
    await database.close();
    await dropDatabase(name);
  }
}

main().catch((err: unknown) => {
  process.stderr.write(
    `benchmark failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exit(1);
});
