/**
 * Gathers the rows the benchmarks appended to BENCH_RESULTS_FILE into bench/RESULTS.md, headed by the machine,
 * the date and the commit they were measured on.
 *   npx tsx test/bench/write-results.ts <rows.jsonl> <out.md> [--merge]
 * With --merge (one benchmark run on its own), the sections it measured replace theirs and the others stay, each
 * section saying when and at which commit it was measured.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync, mkdirSync } from "node:fs";
import os from "node:os";
import path from "node:path";

interface Row {
  section: string;
  name: string;
  value: string;
  baseline?: string;
  ratio?: string;
  target?: string;
}

const [rowsFile, outFile] = process.argv.slice(2).filter((a) => a !== "--merge");
const merge = process.argv.includes("--merge");
if (!rowsFile || !outFile) {
  console.error("usage: write-results.ts <rows.jsonl> <out.md>");
  process.exit(2);
}
const rows: Row[] = readFileSync(rowsFile, "utf8")
  .split("\n")
  .filter((line) => line.trim() !== "")
  .map((line) => JSON.parse(line) as Row);

const git = (...args: string[]) => {
  try {
    return execFileSync("git", args, { encoding: "utf8" }).trim();
  } catch {
    return "unknown";
  }
};
const commit = git("rev-parse", "--short", "HEAD");
const dirty = git("status", "--porcelain") !== "" ? " (with uncommitted changes)" : "";
const cpus = os.cpus();

const lines = [
  "# Benchmark results",
  "",
  "Written by `npm run bench`; every figure sits beside a baseline measured in the same run. Numbers move with",
  "the machine's load: compare ratios, not absolute figures, across runs.",
  "",
  `- Date: ${new Date().toISOString()}`,
  `- Commit: ${commit}${dirty}`,
  `- Machine: ${cpus.length} × ${cpus[0]?.model ?? "unknown CPU"}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, ${os.platform()} ${os.release()}`,
  `- Node: ${process.version}`,
  `- Mode: ${process.env.BENCH_MODE ?? "full"} (\`npm run bench -- --quick\` runs smaller sizes and a 30 s soak)`,
  "",
];
const sections = [...new Set(rows.map((r) => r.section))];
const measured = `_Measured ${new Date().toISOString()} at ${commit}${dirty}._`;
// The sections this run did not measure, kept with when they were (the old file's date and commit by default).
const kept: string[] = [];
if (merge && existsSync(outFile)) {
  const old = readFileSync(outFile, "utf8");
  const at = /^- Date: (.*)$/m.exec(old)?.[1];
  const sha = /^- Commit: (.*)$/m.exec(old)?.[1];
  for (const block of old.split(/^(?=## )/m).slice(1)) {
    const title = block.split("\n", 1)[0]!.slice(3);
    if (sections.includes(title)) continue;
    const body = block.trimEnd().split("\n");
    if (!body[2]?.startsWith("_Measured "))
      body.splice(1, 0, "", `_Measured ${at ?? "earlier"} at ${sha ?? "unknown"}._`);
    kept.push(...body, "");
  }
}
for (const section of sections) {
  lines.push(
    `## ${section}`,
    "",
    ...(merge ? [measured, ""] : []),
    "| measured | value | baseline (same run) | ratio | target |",
    "|---|---|---|---|---|",
  );
  for (const r of rows.filter((x) => x.section === section)) {
    lines.push(`| ${r.name} | ${r.value} | ${r.baseline ?? "—"} | ${r.ratio ?? "—"} | ${r.target ?? "—"} |`);
  }
  lines.push("");
}
lines.push(...kept);
mkdirSync(path.dirname(outFile), { recursive: true });
writeFileSync(outFile, lines.join("\n"));
console.log(`wrote ${outFile} (${rows.length} rows)`);
