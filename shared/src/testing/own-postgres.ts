import { execFile, execFileSync } from "node:child_process";
import { mkdtemp, rm, chmod } from "node:fs/promises";
import { chownSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { freePort } from "./ports";

const run = promisify(execFile);

/** A PostgreSQL cluster of the test's own (initdb into a temp dir), so a fault test can restart it; the shared peer is never touched. */
export interface OwnPostgres {
  /** Superuser connection string to its `postgres` database (trust auth on 127.0.0.1). */
  adminUrl: string;
  port: number;
  /** pg_ctl restart -m fast: in-flight transactions are rolled back and every connection drops. */
  restart(): Promise<void>;
  /** pg_ctl stop -m immediate (a crash: no shutdown checkpoint); up() starts it again on the same port. */
  down(): Promise<void>;
  up(): Promise<void>;
  stop(): Promise<void>;
}

function binDir(): string {
  if (process.env.PG_BIN_DIR) return process.env.PG_BIN_DIR;
  try {
    return path.dirname(execFileSync("pg_config", ["--bindir"]).toString().trim() + "/x");
  } catch {
    return "/usr/lib/postgresql/15/bin";
  }
}

export async function startOwnPostgres(): Promise<OwnPostgres> {
  const bin = binDir();
  const dir = await mkdtemp(path.join(os.tmpdir(), "cgs-own-pg-"));
  const data = path.join(dir, "data");
  const port = await freePort();
  // initdb refuses to run as root: run the server tools as the postgres user then.
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const { uid, gid } = userIds("postgres");
    chownSync(dir, uid, gid);
    await chmod(dir, 0o700);
  }
  const tool = (name: string, args: string[]) =>
    asRoot
      ? run("su", ["postgres", "-s", "/bin/sh", "-c", [path.join(bin, name), ...args.map(quote)].join(" ")])
      : run(path.join(bin, name), args);
  const ctl = (args: string[]) =>
    tool("pg_ctl", ["-D", data, "-l", path.join(dir, "log"), "-w", "-t", "30", ...args]);
  await tool("initdb", ["-D", data, "-A", "trust", "-U", "postgres", "--no-sync"]);
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`;
  await ctl(["-o", options, "start"]);
  return {
    adminUrl: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    restart: async () => {
      await ctl(["-m", "fast", "-o", options, "restart"]);
    },
    down: async () => {
      await ctl(["-m", "immediate", "stop"]);
    },
    up: async () => {
      await ctl(["-o", options, "start"]);
    },
    stop: async () => {
      await ctl(["-m", "immediate", "stop"]).catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

function quote(arg: string): string {
  return `'${arg.replace(/'/g, "'\\''")}'`;
}

function userIds(name: string): { uid: number; gid: number } {
  const uid = Number(execFileSync("id", ["-u", name]).toString().trim());
  const gid = Number(execFileSync("id", ["-g", name]).toString().trim());
  return { uid, gid };
}
