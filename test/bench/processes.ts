/** Waiting for and stopping the processes a benchmark starts (services, gateways, proxies, upstreams). */
import type { ChildProcess } from "node:child_process";

/**
 * Resolves once `url` answers with a status under 500 (a readiness path answers 200 once ready); throws if `child`
 * exits first or nothing answers within timeoutMs.
 */
export async function waitAnswering(url: string, child?: ChildProcess, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child && child.exitCode !== null)
      throw new Error(`the process for ${url} exited with ${child.exitCode}`);
    try {
      const res = await fetch(url);
      await res.arrayBuffer();
      if (res.status < 500) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${url} did not answer within ${timeoutMs} ms`);
}

/** SIGTERM, then SIGKILL if the process is still there after graceMs; resolves once it has exited. */
export async function stopChild(child: ChildProcess | undefined, graceMs = 10_000): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
  await exited;
  clearTimeout(timer);
}
