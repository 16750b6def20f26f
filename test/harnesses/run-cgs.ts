import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import path from "node:path";

/** The built `cgs` (npm run build). */
export const cgsBin = path.resolve(__dirname, "../../clients/cli/bin/cgs.js");

export interface CgsResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The environment a person's shell would give cgs: their own config dir, no SERVICE_BASE_URL unless set. */
export function cgsEnv(configHome: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, XDG_CONFIG_HOME: configHome, ...extra };
  if (!("SERVICE_BASE_URL" in extra)) delete env.SERVICE_BASE_URL;
  return env;
}

/** Starts the built `cgs` binary as a child process. */
export function spawnCgs(args: string[], env: NodeJS.ProcessEnv): ChildProcessWithoutNullStreams {
  return spawn(process.execPath, [cgsBin, ...args], { env, stdio: "pipe" });
}

/** Runs `cgs ARGS` to completion, with `input` on standard input. */
export function runCgs(args: string[], env: NodeJS.ProcessEnv, input = ""): Promise<CgsResult> {
  const child = spawnCgs(args, env);
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => (stdout += d));
  child.stderr.on("data", (d) => (stderr += d));
  child.stdin.end(input);
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, stdout, stderr })));
}
