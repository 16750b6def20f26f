import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { audit, isServerError, overlaps, type AuditResult } from "./soak-audit";
import {
  describeSchedule,
  faultSchedule,
  FAULT_KINDS,
  injectFault,
  seededRandom,
  type FaultWindow,
  type PlannedFault,
} from "./soak-faults";
import {
  newStats,
  runPlayers,
  type PaymentRecord,
  type PlayerStats,
  type RequestRecord,
} from "./soak-players";
import { startSoakPlatform } from "./soak-platform";
import { repoRoot } from "../platform/launch-platform";

export interface SoakOptions {
  players: number;
  minutes: number;
  seed: number;
  log?(line: string): void;
}

export interface SoakResult {
  options: SoakOptions;
  commit: string;
  schedule: PlannedFault[];
  windows: FaultWindow[];
  stats: PlayerStats;
  requests: RequestRecord[];
  payments: PaymentRecord[];
  audit: AuditResult;
  violations: number;
  report: string;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function commitOf(): string {
  const git = (...args: string[]) =>
    spawnSync("git", args, { cwd: repoRoot, encoding: "utf8" }).stdout.trim();
  const head = git("rev-parse", "--short", "HEAD") || "unknown";
  return git("status", "--porcelain", "--untracked-files=no") ? `${head} (with local changes)` : head;
}

/**
 * The soak: the platform with its own faultable peers, `players` players for `minutes`, the seed's fault schedule
 * meanwhile, then the audit after everything settled. Throws only when it cannot run (the platform does not come
 * up, a fault does not heal); violations are in the result.
 */
export async function runSoak(options: SoakOptions): Promise<SoakResult> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const durationMs = Math.round(options.minutes * 60_000);
  const schedule = faultSchedule(options.seed, durationMs);
  log(`soak: seed ${options.seed}, ${options.players} players, ${options.minutes} min; fault schedule:`);
  log(describeSchedule(schedule));
  const soak = await startSoakPlatform();
  try {
    log(`soak: platform up at ${soak.base}`);
    const random = seededRandom(options.seed);
    const requests: RequestRecord[] = [];
    const payments: PaymentRecord[] = [];
    const stats = newStats();
    const windows: FaultWindow[] = [];
    const ctx = {
      soak,
      random,
      runId: `${options.seed}-${Date.now()}`,
      loadEndsAt: 0,
      hardDeadline: 0,
      requests,
      payments,
      stats,
      log,
    };
    // The clock starts once the players are signed in (creating Keycloak users is not load).
    const players = runPlayers(ctx, options.players, () => {
      ctx.loadEndsAt = Date.now() + durationMs;
      ctx.hardDeadline = ctx.loadEndsAt + 120_000;
    });
    await waitFor(() => ctx.loadEndsAt > 0);
    const loadStart = ctx.loadEndsAt - durationMs;
    const faultRandom = seededRandom(options.seed ^ 0xfa17);
    for (const fault of schedule) {
      const wait = loadStart + fault.atMs - Date.now();
      if (wait > 0) await sleep(wait);
      const injected = await Promise.all([
        injectFault(soak, fault, faultRandom),
        ...(fault.with ? [injectFault(soak, { ...fault, kind: fault.with }, faultRandom)] : []),
      ]);
      for (const window of injected) {
        log(
          `soak: +${((window.startedAt - loadStart) / 1000).toFixed(1)} s (${new Date(window.startedAt).toISOString()}) ` +
            `${window.kind}: ${window.note}, healed in ${window.healedAt - window.startedAt} ms`,
        );
        windows.push(window);
      }
    }
    await players;
    log(`soak: load done (${requests.length} requests); settling and auditing`);
    const result = await audit({ soak, requests, payments, windows, settleTimeoutMs: 90_000, log });
    const platformLog = path.join(os.tmpdir(), `cgs-soak-${options.seed}-platform.log`);
    writeFileSync(platformLog, soak.platform.output());
    log(`soak: the platform's output is in ${platformLog}`);
    const violations = result.invariants.reduce((n, i) => n + i.violations.length, 0);
    const partial: Omit<SoakResult, "report"> = {
      options,
      commit: commitOf(),
      schedule,
      windows,
      stats,
      requests,
      payments,
      audit: result,
      violations,
    };
    return { ...partial, report: renderReport(partial) };
  } finally {
    await soak.close();
  }
}

async function waitFor(check: () => boolean): Promise<void> {
  while (!check()) await sleep(100);
}

function p99(values: number[]): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)]!;
}

function deliveries(payments: PaymentRecord[]): string {
  const counts = new Map<string, number>();
  for (const p of payments) counts.set(p.delivery, (counts.get(p.delivery) ?? 0) + 1);
  return [...counts].map(([how, n]) => `${n} ${how}`).join(", ") || "none";
}

const pct = (part: number, whole: number) => (whole ? `${((100 * part) / whole).toFixed(2)} %` : "-");

export function renderReport(r: Omit<SoakResult, "report">): string {
  const { options, stats, windows, requests, audit: result } = r;
  const inside = requests.filter((q) => overlaps(q, windows));
  const outside = requests.filter((q) => !overlaps(q, windows));
  const row = (cells: (string | number)[]) => `| ${cells.join(" | ")} |`;
  const lines = [
    "# Soak",
    "",
    `Seed ${options.seed}, commit ${r.commit}, ${options.players} players for ${options.minutes} min, ` +
      `${new Date().toISOString().slice(0, 16)}Z. Replay: \`npm run soak -- --players ${options.players} ` +
      `--minutes ${options.minutes} --seed ${options.seed}\`.`,
    "",
    "## Journeys",
    "",
    row([
      "started",
      "completed",
      "ended by a fault",
      "abandoned",
      "top-ups",
      "refunds",
      "disputes",
      "accounts deleted",
    ]),
    row(Array(8).fill("---")),
    row([
      stats.journeysStarted,
      stats.journeysCompleted,
      stats.journeysEndedByFault,
      stats.journeysAbandoned,
      stats.topups,
      stats.refunds,
      stats.disputes,
      stats.accountsDeleted,
    ]),
    "",
    ...Object.entries(stats.outcomes).map(([why, n]) => `- ${n} × ${why}`),
    "",
    `Top-ups by how their paying webhooks were delivered: ${deliveries(r.payments)}.`,
    "",
    "## Faults injected",
    "",
    row(["kind", "injected", "skipped", "longest outage"]),
    row(["---", "---", "---", "---"]),
    ...FAULT_KINDS.map((kind) => {
      const of = windows.filter((w) => w.kind === kind);
      const done = of.filter((w) => !w.skipped);
      const longest = Math.max(0, ...done.map((w) => w.healedAt - w.startedAt));
      return row([kind, done.length, of.length - done.length, `${(longest / 1000).toFixed(1)} s`]);
    }),
    "",
    "## Requests through the gateway",
    "",
    row(["", "requests", "5xx or no answer", "error rate", "p99 latency"]),
    row(["---", "---", "---", "---", "---"]),
    ...(
      [
        ["inside fault windows", inside],
        ["outside fault windows", outside],
      ] as const
    ).map(([label, set]) => {
      const errors = set.filter(isServerError).length;
      return row([label, set.length, errors, pct(errors, set.length), `${p99(set.map((q) => q.ms))} ms`]);
    }),
    "",
    "## Invariants",
    "",
    row(["invariant", "checked", "violations"]),
    row(["---", "---", "---"]),
    ...result.invariants.map((i) => row([i.name, i.checked, i.violations.length])),
    "",
  ];
  const violated = result.invariants.filter((i) => i.violations.length > 0);
  if (violated.length) {
    lines.push("## Violations", "");
    for (const i of violated) {
      lines.push(`- ${i.name}:`);
      for (const v of i.violations.slice(0, 20)) lines.push(`  - ${v}`);
      if (i.violations.length > 20) lines.push(`  - … and ${i.violations.length - 20} more`);
    }
    lines.push("");
  }
  lines.push("## Dead letters", "");
  if (result.deadLetters.length === 0) lines.push("None.");
  for (const d of result.deadLetters) lines.push(`- ${d.queue}: ${d.eventType} ${d.eventId}: ${d.why}`);
  lines.push(
    "",
    "## Fault schedule (as run)",
    "",
    "```",
    ...windows.map(
      (w) =>
        `${w.kind.padEnd(26)} ${w.skipped ? "skipped" : `healed in ${w.healedAt - w.startedAt} ms`.padEnd(20)} ${w.note}`,
    ),
    "```",
    "",
    `Settled in ${(result.settledInMs / 1000).toFixed(1)} s after the load. A fault window runs from the injection until ` +
      "every process answers again, plus 3 s for requests already under way.",
    "",
  );
  return lines.join("\n");
}
