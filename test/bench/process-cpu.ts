/**
 * CPU accounting for benchmarks, from /proc: what a process (or every process of a program) and the whole machine
 * spent while a load ran. Figures per request are robust to the machine's speed drifting between runs; the
 * machine's busy share says whether a run was bound by its cores.
 */
import { readdirSync, readFileSync } from "node:fs";
import os from "node:os";

/** CPU seconds (user + system, every thread) a process has used so far, from /proc (clock ticks of 10 ms). */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** The live processes whose command name (/proc/PID/comm) is `name`, e.g. every PostgreSQL backend. */
export function pidsNamed(name: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, "utf8").trim() === name) pids.push(Number(entry));
    } catch {
      // exited while listing
    }
  }
  return pids;
}

/** Busy and total CPU seconds of the whole machine so far (all cores), from /proc/stat. */
function machineSeconds(): { busy: number; total: number } {
  const line = readFileSync("/proc/stat", "utf8").split("\n", 1)[0]!;
  const ticks = line.trim().split(/\s+/).slice(1, 9).map(Number);
  const total = ticks.reduce((sum, t) => sum + t, 0);
  // idle + iowait are not busy.
  return { busy: (total - ticks[3]! - ticks[4]!) / 100, total: total / 100 };
}

/** CPU seconds spent over a run, as µs a request of the run. */
export const usPerRequest = (seconds: number, requests: number): number => (seconds * 1e6) / requests;

export interface CpuSpent {
  /** CPU seconds each named group spent (a process that exited mid-run counts up to its last reading). */
  seconds: Record<string, number>;
  /** CPU seconds the whole machine (every process, the kernel) spent busy. */
  machineSeconds: number;
  /** Share of all the machine's cores that was busy, 0..1. */
  machineBusy: number;
  cores: number;
}

/**
 * Runs `work` and reports the CPU seconds each group of processes spent meanwhile. Groups are fixed pids or a
 * function listing pids (such as every PostgreSQL backend); a process that starts during the run is not counted,
 * so warm the load up first.
 */
export async function cpuDuring<T>(
  groups: Record<string, number[] | (() => number[])>,
  work: () => T | Promise<T>,
): Promise<[T, CpuSpent]> {
  const read = () => {
    const out = new Map<string, Map<number, number>>();
    for (const [name, pids] of Object.entries(groups)) {
      const readings = new Map<number, number>();
      for (const pid of typeof pids === "function" ? pids() : pids) {
        try {
          readings.set(pid, cpuSeconds(pid));
        } catch {
          // gone
        }
      }
      out.set(name, readings);
    }
    return out;
  };
  const before = read();
  const machineBefore = machineSeconds();
  const result = await work();
  const machineAfter = machineSeconds();
  const after = read();
  const seconds: Record<string, number> = {};
  for (const [name, readings] of after) {
    let sum = 0;
    for (const [pid, end] of readings) sum += end - (before.get(name)?.get(pid) ?? end);
    seconds[name] = sum;
  }
  const total = machineAfter.total - machineBefore.total;
  return [
    result,
    {
      seconds,
      machineSeconds: machineAfter.busy - machineBefore.busy,
      machineBusy: total > 0 ? (machineAfter.busy - machineBefore.busy) / total : NaN,
      cores: os.cpus().length,
    },
  ];
}
