import { spawn, type ChildProcess } from "node:child_process";
import { Resolver } from "node:dns/promises";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { freePort } from "./ports";

/** A dnsmasq of the test's own on a free port, publishing the A records the test sets (`bash test/peers/debian-tools.sh`). */
export interface OwnDnsmasq {
  /** host:port to ask. */
  server: string;
  /** Publishes exactly these addresses for `name` (re-read on SIGHUP), and waits until they are answered. */
  setRecords(name: string, addresses: string[]): Promise<void>;
  stop(): Promise<void>;
}

export async function startOwnDnsmasq(bin = process.env.DNSMASQ_BIN ?? "dnsmasq"): Promise<OwnDnsmasq> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "cgs-dnsmasq-"));
  // dnsmasq reads the file after dropping privileges.
  chmodSync(dir, 0o755);
  const hosts = path.join(dir, "hosts");
  // A first record to know it answers: a SIGHUP before dnsmasq set its handler would end it.
  writeFileSync(hosts, "127.0.0.1 ready.cgs.test\n", { mode: 0o644 });
  const port = await freePort();
  const server = `127.0.0.1:${port}`;
  const child: ChildProcess = spawn(
    bin,
    [
      "--keep-in-foreground",
      "--conf-file=/dev/null",
      "--no-resolv",
      "--no-hosts",
      `--addn-hosts=${hosts}`,
      `--port=${port}`,
      "--listen-address=127.0.0.1",
      "--bind-interfaces",
      `--pid-file=${path.join(dir, "pid")}`,
      "--local-ttl=1",
    ],
    { stdio: "ignore" },
  );
  let exited = false;
  child.once("exit", () => (exited = true));
  const resolver = new Resolver({ timeout: 500, tries: 1 });
  resolver.setServers([server]);

  const answered = async (name: string, want: string[]): Promise<void> => {
    const deadline = Date.now() + 10_000;
    for (;;) {
      if (exited) throw new Error(`${bin} exited (is dnsmasq installed? bash test/peers/debian-tools.sh)`);
      const got = await resolver.resolve4(name).catch(() => [] as string[]);
      if (got.length === want.length && want.every((a) => got.includes(a))) return;
      if (Date.now() > deadline) throw new Error(`dnsmasq on ${server} did not answer ${name} with ${want}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const setRecords = async (name: string, addresses: string[]) => {
    writeFileSync(hosts, addresses.map((a) => `${a} ${name}\n`).join(""));
    child.kill("SIGHUP");
    await answered(name, addresses);
  };
  await answered("ready.cgs.test", ["127.0.0.1"]);
  return {
    server,
    setRecords,
    async stop() {
      if (!exited) {
        const gone = new Promise((r) => child.once("exit", r));
        child.kill("SIGTERM");
        await gone;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
