/**
 * wrk (Debian's; test/peers/bench-tools.sh installs it) as a load generator that spreads its requests over many
 * bearer tokens, so a benchmark sees many accounts rather than one hot row and one cached token.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";

export interface LoadResult {
  rps: number;
  /** Requests completed in the run. */
  requests: number;
  p50ms: number;
  p99ms: number;
  /** Non-2xx answers plus socket errors: a run with any is not a clean figure. */
  failures: number;
}

export interface LoadOptions {
  url: string;
  /** Each request carries the next of these as its bearer token (round robin per wrk thread; one: every request). */
  tokens: readonly string[];
  seconds: number;
  connections?: number;
  /** Default: 2, or fewer when there are fewer connections. */
  threads?: number;
}

const toMs = (value: string, unit: string): number =>
  unit === "us" ? Number(value) / 1000 : unit === "s" ? Number(value) * 1000 : Number(value);

/** wrk's arguments for the tokens: one token goes in a plain header, several need a script to rotate them. */
function tokenArgs(tokens: readonly string[], dir: string): string[] {
  if (tokens.length === 1) return ["-H", `Authorization: Bearer ${tokens[0]}`];
  const script = path.join(dir, "tokens.lua");
  // Each thread starts at its own offset so two threads do not walk the accounts in lockstep.
  writeFileSync(
    script,
    `local tokens = {${tokens.map((t) => JSON.stringify(t)).join(",")}}\n` +
      "local i = 0\n" +
      "function init(args) i = math.random(#tokens) end\n" +
      "function request()\n" +
      "  i = i % #tokens + 1\n" +
      '  return wrk.format("GET", nil, { Authorization = "Bearer " .. tokens[i] })\n' +
      "end\n",
  );
  return ["-s", script];
}

/**
 * Runs wrk without blocking this process's event loop, so servers living in it (the spans' OTLP receiver) keep
 * answering during the run, as a collector would, and its RSS can be sampled meanwhile. With one token wrk sends it
 * in a header and runs no script: a script's call per request costs wrk CPU on the cores the run measures.
 */
export async function runWrk({
  url,
  tokens,
  seconds,
  connections = 32,
  threads = Math.min(2, connections),
}: LoadOptions): Promise<LoadResult> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "cgs-wrk-"));
  try {
    const text = await new Promise<string>((resolve, reject) =>
      execFile(
        "wrk",
        [`-t${threads}`, `-c${connections}`, `-d${seconds}s`, "--latency", ...tokenArgs(tokens, dir), url],
        { encoding: "utf8", timeout: (seconds + 30) * 1000 },
        (err, stdout, stderr) =>
          err || !/Requests\/sec/.test(stdout)
            ? reject(new Error(`wrk failed: ${stderr || stdout || String(err)}`))
            : resolve(stdout),
      ),
    );
    const percentile = (p: string) => {
      const m = new RegExp(`^\\s*${p}%\\s+([\\d.]+)(us|ms|s)`, "m").exec(text);
      return m ? toMs(m[1]!, m[2]!) : NaN;
    };
    const socketErrors = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(text);
    return {
      rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(text)?.[1] ?? NaN),
      requests: Number(/(\d+) requests in/.exec(text)?.[1] ?? NaN),
      p50ms: percentile("50"),
      p99ms: percentile("99"),
      failures:
        Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(text)?.[1] ?? 0) +
        (socketErrors ? socketErrors.slice(1).reduce((sum, n) => sum + Number(n), 0) : 0),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
