import { spawn, spawnSync, type ChildProcess, type SpawnOptions } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { parse } from "yaml";

/**
 * How production runs the gateway, for the benchmarks that put it on a request's path (gateway-bench, and the
 * sessions bench's poll through the gateway): the images' runtime, the prod chart's NODE_OPTIONS and its
 * container's memory limit.
 */
const root = path.resolve(__dirname, "..", "..");

/**
 * The runtime the gateway runs on: the images' (Node 24, from test/peers/node24.sh, which npm run bench passes
 * as BENCH_GATEWAY_NODE) unless told otherwise, else this process's Node.
 */
export const GATEWAY_NODE = process.env.BENCH_GATEWAY_NODE || process.execPath;

/** "512Mi" → bytes. */
function quantityBytes(quantity: string): number {
  const m = /^(\d+)(Ki|Mi|Gi)?$/.exec(quantity);
  if (!m) throw new Error(`unsupported memory quantity ${quantity}`);
  return Number(m[1]) * { Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, "": 1 }[m[2] ?? ""]!;
}

interface ChartValues {
  serviceDefaults?: { resources?: { limits?: { memory?: string } } };
  services?: { gateway?: { resources?: { limits?: { memory?: string } }; env?: Record<string, string> } };
}

/**
 * How the prod chart runs the gateway: its container's memory limit (its own, else the services' default) and
 * its NODE_OPTIONS, from values.yaml overlaid with values-prod.yaml, the way helm merges them.
 */
export function productionGateway(): { memoryLimit: string; nodeOptions: string } {
  const read = (file: string) =>
    parse(readFileSync(path.join(root, "charts", "cgs-platform", file), "utf8")) as ChartValues;
  const layers = [read("values.yaml"), read("values-prod.yaml")];
  const last = <T>(pick: (v: ChartValues) => T | undefined): T | undefined =>
    layers.map(pick).reduce<T | undefined>((found, value) => value ?? found, undefined);
  const memoryLimit =
    last((v) => v.services?.gateway?.resources?.limits?.memory) ??
    last((v) => v.serviceDefaults?.resources?.limits?.memory);
  if (!memoryLimit) throw new Error("the chart sets no memory limit for the gateway");
  return { memoryLimit, nodeOptions: last((v) => v.services?.gateway?.env?.NODE_OPTIONS) ?? "" };
}

/**
 * A memory cgroup (v1) with the pod's limit (a Kubernetes quantity, "512Mi"), so Node sizes its heap from the limit
 * as it does in the pod (on a 24 GiB machine it would size it from the machine). Undefined where the machine does
 * not allow one.
 */
export function memoryCgroup(memoryLimit: string, name: string): string | undefined {
  const limitBytes = quantityBytes(memoryLimit);
  try {
    const own = /^\d+:memory:(.*)$/m.exec(readFileSync("/proc/self/cgroup", "utf8"))?.[1];
    if (own === undefined) return undefined;
    const dir = path.join("/sys/fs/cgroup/memory", own, `cgs-bench-${process.pid}-${name}`);
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, "memory.limit_in_bytes"), String(limitBytes));
    return dir;
  } catch {
    return undefined;
  }
}

/** Spawns node (nodeBin) with args, inside cgroup when given; stdout is dropped, stderr shown. */
export function spawnNode(
  nodeBin: string,
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv },
  cgroup?: string,
): ChildProcess {
  const all: SpawnOptions = { ...options, stdio: ["ignore", "ignore", "inherit"] };
  // The shell joins the cgroup, then becomes node: the pid (and so RSS and CPU) is node's.
  return cgroup
    ? spawn("sh", ["-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', cgroup, nodeBin, ...args], all)
    : spawn(nodeBin, args, all);
}

/** The version a node binary reports ("v24.1.0"). */
export function nodeVersion(bin: string): string {
  return spawnSync(bin, ["--version"], { encoding: "utf8" }).stdout.trim();
}
