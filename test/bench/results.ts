/**
 * One way for every benchmark to report: a row is a measured figure beside the baseline taken in the same run
 * and the target. `reportRows` prints the rows as a Markdown table and, when `npm run bench` set
 * BENCH_RESULTS_FILE, appends them (one JSON object per line) for `write-results.ts` to gather into
 * bench/RESULTS.md. Nothing here judges a number: a benchmark never fails because it is slow.
 */
import { appendFileSync } from "node:fs";

export interface BenchRow {
  /** What was measured, e.g. "gateway → upstream (all checks)". */
  name: string;
  /** The figure with its unit, e.g. "9,120 req/s" or "0.41 s". */
  value: string;
  /** The same-run baseline it is compared with, e.g. "nginx 35,330 req/s". */
  baseline?: string;
  /** value / baseline (or the other way round when smaller is better), e.g. "0.26×". */
  ratio?: string;
  /** The target, e.g. "≥ 0.20× nginx". */
  target?: string;
}

export function reportRows(section: string, rows: BenchRow[]): void {
  console.log(`\n### ${section}\n`);
  console.log("| measured | value | baseline (same run) | ratio | target |");
  console.log("|---|---|---|---|---|");
  for (const r of rows) {
    console.log(`| ${r.name} | ${r.value} | ${r.baseline ?? "—"} | ${r.ratio ?? "—"} | ${r.target ?? "—"} |`);
  }
  const file = process.env.BENCH_RESULTS_FILE;
  if (file) {
    appendFileSync(file, rows.map((r) => JSON.stringify({ section, ...r })).join("\n") + "\n");
  }
}

/** 12345.6 → "12,346"; small numbers keep `digits` decimals. */
export function formatNumber(n: number, digits = 0): string {
  return n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
}
