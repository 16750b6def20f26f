import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { headscalePolicy, STREAMING_TCP_PORTS, STREAMING_UDP_PORT_RANGE } from "../network/tailnet-policy";
import { freePort } from "./ports";
import { waitUntil } from "./queue";

const run = promisify(execFile);
const repoRoot = path.resolve(__dirname, "..", "..", "..");
const script = path.join(repoRoot, "test", "peers", "headscale.sh");

/** The directory holding headscale, tailscaled and tailscale (built on a cold cache). */
export async function headscaleBinaries(): Promise<string> {
  const { stdout } = await run("bash", [script, "install"], { timeout: 1_800_000 });
  return stdout.trim();
}

/** A Headscale of the test's own (sqlite in a temp dir, a free loopback port), started by test/peers/headscale.sh. */
export interface RunningHeadscale {
  url: string;
  apiKey: string;
  /** Where headscale, tailscaled and tailscale are. */
  binDir: string;
  /** One call to its REST API (`/api/v1/...`) with the API key; throws on a non-2xx answer. */
  api<T = unknown>(method: string, apiPath: string, body?: unknown): Promise<T>;
  stop(): Promise<void>;
}

/** Starts Headscale with the platform's policy (or the one given); builds it first on a cold cache. */
export async function startHeadscale(options: { policy?: unknown } = {}): Promise<RunningHeadscale> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "cgs-headscale-"));
  const policyFile = path.join(dir, "policy.json");
  const policy =
    options.policy ??
    headscalePolicy({ tcpPorts: STREAMING_TCP_PORTS, udpPortRange: STREAMING_UDP_PORT_RANGE });
  writeFileSync(policyFile, JSON.stringify(policy, null, 2));
  const port = await freePort();
  const { stdout } = await run("bash", [script, "start", path.join(dir, "state"), String(port), policyFile], {
    maxBuffer: 1 << 20,
    // A cold cache builds Headscale and tailscaled first.
    timeout: 1_800_000,
  });
  const env = Object.fromEntries(
    stdout
      .split("\n")
      .map((line) => /^export ([A-Z_]+)=(.*)$/.exec(line.trim()))
      .filter((m) => m !== null)
      .map((m) => [m[1]!, m[2]!]),
  );
  const url = env.HEADSCALE_URL!;
  const apiKey = env.HEADSCALE_API_KEY!;
  return {
    url,
    apiKey,
    binDir: env.HEADSCALE_BIN_DIR!,
    async api<T>(method: string, apiPath: string, body?: unknown): Promise<T> {
      const res = await fetch(`${url}${apiPath}`, {
        method,
        headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      if (!res.ok) throw new Error(`headscale answered ${res.status} to ${method} ${apiPath}: ${text}`);
      return (text ? JSON.parse(text) : {}) as T;
    },
    async stop() {
      await run("bash", [script, "stop", path.join(dir, "state")]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface NodeStatus {
  /** This node's tailnet IPv4 address (empty before it joined). */
  ip: string;
  /** The peers in its network map: whom the control plane lets it see. */
  peers: Array<{ ip: string; hostName: string; online: boolean }>;
}

/** A real tailscaled in userspace-networking mode (no TUN device, no root), with its own state dir and socket. */
export interface TailscaleNode {
  name: string;
  /** `tailscale up` with a key; rejects with tailscale's own message (e.g. "authkey already used"). */
  join(key: string, loginServer: string, options?: { shieldsUp?: boolean }): Promise<void>;
  status(): Promise<NodeStatus>;
  /**
   * Opens a TCP connection through this node to a tailnet address, sends a line and returns the line the other end
   * answered, or undefined when nothing answered within `timeoutMs` (the packet filter drops what the policy denies).
   * `tailscale nc` prints its own state on the same stream ("Logged out." once the node was deleted).
   */
  tcp(ip: string, port: number, timeoutMs?: number): Promise<string | undefined>;
  /**
   * Waits for a disco pong from a peer in its map: the path is up (the packet filter does not apply to it), so
   * a connection that gets no answer afterwards was refused by the policy, not lost to a cold start.
   */
  ping(ip: string): Promise<void>;
  /** `tailscale logout`: an ephemeral node leaves the network. */
  logout(): Promise<void>;
  stop(): Promise<void>;
}

export async function startTailscaleNode(binDir: string, name: string): Promise<TailscaleNode> {
  const dir = mkdtempSync(path.join(os.tmpdir(), `cgs-ts-${name}-`));
  mkdirSync(path.join(dir, "state"));
  const socket = path.join(dir, "tailscaled.sock");
  const tailscale = path.join(binDir, "tailscale");
  let log = "";
  const daemon: ChildProcess = spawn(
    path.join(binDir, "tailscaled"),
    ["--tun=userspace-networking", `--statedir=${path.join(dir, "state")}`, `--socket=${socket}`, "--port=0"],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  daemon.stdout?.on("data", (d) => (log = (log + d).slice(-4000)));
  daemon.stderr?.on("data", (d) => (log = (log + d).slice(-4000)));
  const cli = (args: string[], timeout = 30_000) =>
    run(tailscale, [`--socket=${socket}`, ...args], { timeout, maxBuffer: 1 << 22 });
  await waitUntil(
    async () => {
      if (daemon.exitCode !== null) throw new Error(`tailscaled ${name} exited: ${log}`);
      return cli(["version"], 5_000).then(
        () => cli(["status", "--json"], 5_000).then(() => true),
        () => false,
      );
    },
    { timeoutMs: 20_000, intervalMs: 200, description: `tailscaled ${name} to answer on its socket` },
  );
  return {
    name,
    async join(key, loginServer, options = {}) {
      try {
        await cli([
          "up",
          `--login-server=${loginServer}`,
          `--authkey=${key}`,
          `--hostname=${name}`,
          ...(options.shieldsUp ? ["--shields-up"] : []),
        ]);
      } catch (err) {
        const e = err as { stderr?: string; stdout?: string; message: string };
        throw new Error(`tailscale up (${name}) failed: ${e.stderr || e.stdout || e.message}`);
      }
    },
    async status() {
      const { stdout } = await cli(["status", "--json"]);
      const body = JSON.parse(stdout) as {
        Self?: { TailscaleIPs?: string[] };
        Peer?: Record<string, { TailscaleIPs?: string[]; HostName?: string; Online?: boolean }>;
      };
      const v4 = (ips?: string[]) => ips?.find((i) => i.includes(".")) ?? "";
      return {
        ip: v4(body.Self?.TailscaleIPs),
        peers: Object.values(body.Peer ?? {}).map((p) => ({
          ip: v4(p.TailscaleIPs),
          hostName: p.HostName ?? "",
          online: p.Online === true,
        })),
      };
    },
    tcp(ip, port, timeoutMs = 4_000) {
      return new Promise((resolve) => {
        const nc = spawn(tailscale, [`--socket=${socket}`, "nc", ip, String(port)], {
          stdio: ["pipe", "pipe", "ignore"],
        });
        let received = "";
        const finish = () => {
          clearTimeout(timer);
          nc.kill("SIGKILL");
          resolve(received === "" ? undefined : received);
        };
        const timer = setTimeout(finish, timeoutMs);
        nc.stdin.on("error", () => undefined);
        nc.stdin.write("hello\n");
        nc.stdout.on("data", (d) => {
          received += d;
          if (received.includes("\n")) finish();
        });
        // "close", not "exit": exit can come before the last of stdout has been read.
        nc.once("close", finish);
      });
    },
    async ping(ip) {
      await waitUntil(
        () =>
          cli(["ping", "--c=1", "--timeout=2s", ip], 10_000).then(
            () => true,
            () => false,
          ),
        { timeoutMs: 30_000, intervalMs: 200, description: `${name} to get a pong from ${ip}` },
      );
    },
    async logout() {
      await cli(["logout"]);
    },
    async stop() {
      if (daemon.exitCode === null && daemon.signalCode === null) {
        const exited = new Promise((resolve) => daemon.once("exit", resolve));
        daemon.kill("SIGTERM");
        const timer = setTimeout(() => daemon.kill("SIGKILL"), 5_000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
