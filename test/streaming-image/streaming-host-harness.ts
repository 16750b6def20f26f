import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as https from "node:https";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { createInterface } from "node:readline";
import type { TLSSocket } from "node:tls";
import { parse } from "yaml";
import type { SQSClient } from "@aws-sdk/client-sqs";
import { normalizeFingerprint, parseSignedHostReport, type SignedHostReport } from "@cgs/host-agent";
import {
  createTestQueue,
  createTestSqsClient,
  drainQueue,
  waitUntil,
  type TestQueue,
} from "@cgs/shared/testing/queue";
import {
  streamingUserData,
  SunshineStreamingHost,
  type LaunchRequest,
  type PoolLaunchRequest,
} from "@cgs/sessions";

/**
 * The streaming image's boot, for real on this machine: the boot scripts and units of infra/streaming-image run
 * as root under a throwaway root (temporary directories standing for /etc/cgs, /run, /var/lib and the volume's mount
 * point), in a network namespace of their own, from the exact user data the sessions service's streamingUserData
 * produces. The account volume is a real loop device that the boot formats and mounts, found like an EBS volume by
 * its /dev/disk/by-id name. Systemd cannot run here, so unit-runner.mjs starts the units in systemd's order (and
 * answers systemctl). The host agent is the real bundle with its own unit, reporting over a veth to SQS on moto.
 * Stand-ins, each saying why in its header: Sunshine (not installable here), the tailscale CLI (the real join is
 * tested with tailscaled and Headscale elsewhere), Xorg (Xvfb, no GPU here) and systemctl (the runner plays systemd).
 */

const REPO = path.resolve(__dirname, "..", "..");
const ROOTFS = path.join(REPO, "infra", "streaming-image", "rootfs");
const UNITS = path.join(ROOTFS, "etc", "systemd", "system");
const STAND_INS = path.join(__dirname, "stand-ins");
const HOST_AGENT = path.join(REPO, "host-agent");
const EBS = "nvme-Amazon_Elastic_Block_Store_";
export const ROOT_VOLUME_ID = "vol-0aaaaaaaaaaaaaaaa";
export const ACCOUNT_VOLUME_ID = "vol-0bbbbbbbbbbbbbbbb";
export const INSTANCE_ID = "i-0b00t000000000000";
/** The assignment endpoint's port (the agent's default). */
export const ASSIGN_PORT = 47991;

const run = (cmd: string, args: string[]) => execFileSync(cmd, args, { encoding: "utf8" }).trim();

const METADATA_SERVER = `require("node:http").createServer((q, r) => r.end("ami-id")).listen(80, "169.254.169.254")`;
const METADATA_PROBE = `require("node:net").connect(80, "169.254.169.254")
  .on("connect", () => { console.log("connected"); process.exit(0); })
  .on("error", (e) => { console.log(e.code); process.exit(0); });`;

export interface RigSettings {
  /** Second octet of the namespace's /30 (10.N.x.0): one per test file, so two files never share an address. */
  subnet: number;
  /** First X display number the file's boots use (+ pid % 300). */
  displayBase: number;
}

export interface LaunchOptions {
  /** The key the instance's agent signs with: the session's, or the pool slot's. */
  agentKey: Buffer;
  failJoin?: boolean;
  attachVolume?: boolean;
}

export type SessionLaunch = Omit<LaunchRequest, "hostAgent">;
export type PoolLaunch = Omit<PoolLaunchRequest, "hostAgent">;

export interface Boot {
  /** Each unit's state once the boot settled (inactive, active, failed, dependency-failed, skipped). */
  states: Record<string, string>;
  events: () => string[];
  output: () => string;
  /** The mounts the instance sees (its own mount namespace). */
  mounts: () => string;
  /** systemctl on the instance (the runner's); its exit code. */
  systemctl: (...args: string[]) => Promise<number>;
  /** Everything stops, as at an instance stop: the runner's units, then its mount namespace. */
  stop: () => Promise<void>;
}

export interface Instance {
  root: string;
  /** The tailscale stand-in's records: up-args, joined-with-key. */
  tailscale: string;
  /** The first call boots from the user data; each later one is a start after a stop (/run emptied, rest kept). */
  boot: () => Promise<Boot>;
  /** Reports the agent delivered from now on, in order, until one satisfies `until` (signatures not checked). */
  reportsUntil: (until: (r: SignedHostReport) => boolean, description: string) => Promise<SignedHostReport[]>;
}

export interface Rig {
  readonly nsIp: string;
  launch: (name: string, request: SessionLaunch | PoolLaunch, options: LaunchOptions) => Promise<Instance>;
  /** Whether a process of this user (root when none) inside the namespace reaches the metadata service. */
  reachMetadataService: (user?: { uid: string; gid: string }) => string;
}

/** One namespace, two loop devices (root disk and account volume), the agent bundle and SQS, for a test file. */
export function useStreamingHostRig(settings: RigSettings): Rig {
  let tmp: string;
  let netns: string;
  let hostIp: string;
  let nsIp: string;
  let volumeLoop: string;
  let rootLoop: string;
  let metadataService: ChildProcess | undefined;
  let sqs: SQSClient;
  let sqsForwarder: net.Server;
  let sqsEndpoint: string;
  let agentBundle: string;
  let nextDisplay = settings.displayBase + (process.pid % 300);
  const queues: TestQueue[] = [];
  const running: Boot[] = [];

  beforeAll(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), "cgs-boot-"));
    // Sunshine runs as an unprivileged user (nobody here): it must reach the volume's paths and its own binary.
    fs.chmodSync(tmp, 0o755);
    const bin = path.join(tmp, "bin");
    fs.mkdirSync(bin);
    for (const name of ["sunshine", "tailscale", "Xorg", "systemctl"])
      fs.copyFileSync(path.join(STAND_INS, name), path.join(bin, name));
    for (const name of fs.readdirSync(bin)) fs.chmodSync(path.join(bin, name), 0o755);

    const disk = (name: string, mib: number) => {
      const file = path.join(tmp, `${name}.img`);
      run("truncate", ["-s", `${mib}M`, file]);
      return run("losetup", ["--find", "--show", file]);
    };
    volumeLoop = disk("account-volume", 64);
    rootLoop = disk("root-disk", 8);

    const id = process.pid % 250;
    const tag = `${settings.subnet}${process.pid % 10000}`;
    netns = `cgsboot${tag}`;
    const hostSide = `cgsb${tag}h`;
    const nsSide = `cgsb${tag}n`;
    hostIp = `10.${settings.subnet}.${id}.1`;
    nsIp = `10.${settings.subnet}.${id}.2`;
    run("ip", ["netns", "add", netns]);
    run("ip", ["link", "add", hostSide, "type", "veth", "peer", "name", nsSide]);
    run("ip", ["link", "set", nsSide, "netns", netns]);
    run("ip", ["addr", "add", `${hostIp}/30`, "dev", hostSide]);
    run("ip", ["link", "set", hostSide, "up"]);
    run("ip", ["netns", "exec", netns, "ip", "addr", "add", `${nsIp}/30`, "dev", nsSide]);
    run("ip", ["netns", "exec", netns, "ip", "link", "set", nsSide, "up"]);
    run("ip", ["netns", "exec", netns, "ip", "link", "set", "lo", "up"]);

    // The instance metadata service's address inside the namespace, answered by a plain HTTP server (a stand-in:
    // only whether a process can reach it matters here).
    run("ip", ["netns", "exec", netns, "ip", "addr", "add", "169.254.169.254/32", "dev", "lo"]);
    metadataService = spawn("ip", ["netns", "exec", netns, process.execPath, "-e", METADATA_SERVER], {
      stdio: "ignore",
    });
  });

  beforeAll(async () => {
    // The real host agent, bundled as the image installs it.
    const { bundleHostAgent } = (await import(path.join(HOST_AGENT, "scripts", "bundle.mjs"))) as {
      bundleHostAgent(out: string): Promise<string>;
    };
    agentBundle = await bundleHostAgent(path.join(tmp, "cgs-host-agent.cjs"));
    // SQS on moto, reached from inside the namespace over the veth: moto listens on loopback only, so a plain TCP
    // hop on the host side of the veth forwards to it.
    process.env.AWS_ACCESS_KEY_ID ||= "test";
    process.env.AWS_SECRET_ACCESS_KEY ||= "test";
    sqs = createTestSqsClient();
    const moto = new URL(process.env.SQS_ENDPOINT || "http://127.0.0.1:5000");
    sqsForwarder = net.createServer((client) => {
      const upstream = net.connect(Number(moto.port), moto.hostname);
      client.pipe(upstream).pipe(client);
      const drop = () => (client.destroy(), upstream.destroy());
      client.on("error", drop);
      upstream.on("error", drop);
    });
    await new Promise<void>((resolve) => sqsForwarder.listen(0, hostIp, resolve));
    sqsEndpoint = `http://${hostIp}:${(sqsForwarder.address() as net.AddressInfo).port}`;
  }, 60_000);

  afterEach(async () => {
    await Promise.all(running.splice(0).map((b) => b.stop()));
  });

  afterAll(async () => {
    await Promise.all(queues.map((q) => q.remove()));
    sqsForwarder?.close();
    sqs?.destroy();
    metadataService?.kill();
    for (const loop of [volumeLoop, rootLoop]) if (loop) execFileSync("losetup", ["-d", loop]);
    if (netns) execFileSync("ip", ["netns", "del", netns]);
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  /** An instance launched from the sessions service's user data: cloud-init's write_files, its disks, /opt/cgs. */
  async function launch(name: string, request: SessionLaunch | PoolLaunch, options: LaunchOptions) {
    const dir = path.join(tmp, name);
    const root = path.join(dir, "root");
    const byId = path.join(dir, "by-id");
    const tailscale = path.join(dir, "tailscale");
    const events = path.join(dir, "events.log");
    const display = nextDisplay++;
    for (const d of [
      "etc/cgs",
      "run",
      "var/lib/cloud/instance",
      "var/lib/cloud/instances/i-0b00t",
      "opt/cgs",
    ]) {
      fs.mkdirSync(path.join(root, d), { recursive: true });
    }
    fs.mkdirSync(byId);
    fs.mkdirSync(tailscale);
    // Sunshine's stand-in runs as nobody and logs here too.
    fs.writeFileSync(events, "", { mode: 0o666 });
    fs.chmodSync(events, 0o666);
    if (options.failJoin) fs.writeFileSync(path.join(tailscale, "fail"), "");

    // cloud-init: the user data the sessions service sends, applied as write_files would, and the copies it keeps.
    const queue = await createTestQueue(sqs, `boot-${name}`);
    queues.push(queue);
    const hostAgent = {
      key: options.agentKey.toString("base64url"),
      reportQueueUrl: queue.queueUrl,
      region: "us-east-1",
    };
    const userData = Buffer.from(streamingUserData({ ...request, hostAgent }), "base64").toString("utf8");
    const cloudConfig = parse(userData) as {
      write_files: { path: string; permissions: string; content: string }[];
    };
    for (const file of cloudConfig.write_files) {
      fs.writeFileSync(path.join(root, file.path), Buffer.from(file.content, "base64"), {
        mode: parseInt(file.permissions, 8),
      });
    }
    for (const copy of [
      "instance/user-data.txt",
      "instance/cloud-config.txt",
      "instances/i-0b00t/user-data.txt",
    ]) {
      fs.writeFileSync(path.join(root, "var/lib/cloud", copy), userData, { mode: 0o600 });
    }

    // The disks as udev names them on a Nitro instance: root and account volume by EBS id; instance storage apart.
    const ebs = (volumeId: string) => path.join(byId, `${EBS}${volumeId.replace("-", "")}`);
    fs.symlinkSync(rootLoop, ebs(ROOT_VOLUME_ID));
    if (options.attachVolume ?? true) fs.symlinkSync(volumeLoop, ebs(ACCOUNT_VOLUME_ID));
    fs.symlinkSync("/dev/null", path.join(byId, "nvme-Amazon_EC2_NVMe_Instance_Storage_AWS0000000000000000"));

    // The image's /opt/cgs: its scripts and files from the repository, and the host agent.
    fs.symlinkSync(path.join(ROOTFS, "opt/cgs/bin"), path.join(root, "opt/cgs/bin"));
    fs.symlinkSync(path.join(ROOTFS, "opt/cgs/lib"), path.join(root, "opt/cgs/lib"));
    fs.symlinkSync(path.join(ROOTFS, "opt/cgs/share"), path.join(root, "opt/cgs/share"));
    fs.mkdirSync(path.join(root, "opt/cgs/host-agent"));
    // The real host agent: its bundle and its own unit, with the image's drop-in.
    fs.copyFileSync(agentBundle, path.join(root, "opt/cgs/host-agent/cgs-host-agent.cjs"));
    const agentUnit = fs.readFileSync(path.join(HOST_AGENT, "packaging", "cgs-host-agent.service"), "utf8");

    const unit = (file: string) => fs.readFileSync(path.join(UNITS, file), "utf8");
    const spec = {
      // Listed backwards: only the units' own After= and Requires= put them in order.
      units: [
        {
          name: "cgs-host-agent.service",
          text: `${agentUnit}\n${unit("cgs-host-agent.service.d/50-streaming-image.conf")}`,
        },
        { name: "cgs-assign.service", text: unit("cgs-assign.service") },
        { name: "cgs-assign.path", text: unit("cgs-assign.path") },
        { name: "cgs-sunshine.service", text: unit("cgs-sunshine.service") },
        { name: "cgs-boot.service", text: unit("cgs-boot.service") },
        { name: "cgs-display.service", text: unit("cgs-display.service") },
      ],
      // The root's own directories; /var/lib/cgs also covers /var/lib/cgs-agent.
      rewrite: [
        ["/usr/bin/sunshine", path.join(tmp, "bin", "sunshine")],
        ["/usr/bin/node", process.execPath],
        ["/tmp/.X11-unix/X0", `/tmp/.X11-unix/X${display}`],
        ["DISPLAY=:0", `DISPLAY=:${display}`],
        ...["/etc/cgs", "/run/cgs", "/var/lib/cgs", "/opt/cgs"].map((p) => [p, path.join(root, p)]),
      ],
      runtimeRoot: path.join(root, "run"),
      stateRoot: path.join(root, "var/lib"),
      // The image's cgs-agent user (and its display group) do not exist here: the agent runs as root in the test.
      users: { sunshine: "nobody", "cgs-agent": "root" },
      groups: { sunshine: "nogroup", "cgs-agent": "root" },
      env: {
        PATH: `${path.join(tmp, "bin")}:${path.dirname(process.execPath)}:${process.env.PATH}`,
        CGS_ROOT: root,
        CGS_DISK_BY_ID: byId,
        CGS_ROOT_DISK: rootLoop,
        CGS_SUNSHINE_USER: "nobody",
        CGS_SUNSHINE_GROUP: "nogroup",
        CGS_DISPLAY: `:${display}`,
        CGS_DISPLAY_GROUP: "nogroup",
        CGS_VOLUME_WAIT_SECONDS: "3",
        CGS_NETWORK_WAIT_SECONDS: "5",
        CGS_JOIN_ATTEMPTS: "2",
        CGS_STANDIN_TAILSCALE_DIR: tailscale,
        EVENTS: events,
        // Only what differs from EC2: moto for SQS, the instance id IMDS would give, quicker looks and reports.
        AWS_ENDPOINT_URL: sqsEndpoint,
        AWS_ACCESS_KEY_ID: "test",
        AWS_SECRET_ACCESS_KEY: "test",
        CGS_INSTANCE_ID: INSTANCE_ID,
        CGS_SAMPLE_INTERVAL_MS: "200",
        CGS_REPORT_INTERVAL_MS: "1000",
      },
      events,
      control: path.join(dir, "systemctl.sock"),
    };
    const specFile = path.join(dir, "spec.json");
    fs.writeFileSync(specFile, JSON.stringify(spec));
    const readOutput = () => fs.readFileSync(events.replace(/\.log$/, ".output"), "utf8");

    let boots = 0;
    const boot = async (): Promise<Boot> => {
      // A start after a stop: /run is a tmpfs, empty again; /etc, /var and the volume's contents stay.
      if (boots++ > 0) fs.rmSync(path.join(root, "run"), { recursive: true, force: true });
      fs.mkdirSync(path.join(root, "run"), { recursive: true });
      const runner: ChildProcess = spawn(
        "ip",
        [
          "netns",
          "exec",
          netns,
          "unshare",
          "--mount",
          "--propagation",
          "private",
          process.execPath,
          path.join(__dirname, "unit-runner.mjs"),
          specFile,
        ],
        { stdio: ["pipe", "pipe", "inherit"] },
      );
      const exited = new Promise<void>((resolve) => runner.once("exit", () => resolve()));
      const first = await new Promise<string>((resolve, reject) => {
        createInterface({ input: runner.stdout! }).once("line", resolve);
        runner.once("exit", (code) => reject(new Error(`unit runner exited (${code}) before reporting`)));
      });
      const booted: Boot = {
        states: (JSON.parse(first) as { units: Record<string, string> }).units,
        events: () => fs.readFileSync(events, "utf8").trim().split("\n"),
        output: readOutput,
        mounts: () => fs.readFileSync(`/proc/${runner.pid}/mounts`, "utf8"),
        systemctl: (...args) =>
          new Promise<number>((resolve, reject) => {
            const child = spawn(path.join(tmp, "bin", "systemctl"), args, {
              env: { ...process.env, CGS_STANDIN_SYSTEMCTL_SOCKET: spec.control },
              stdio: "ignore",
            });
            child.on("error", reject);
            child.on("exit", (code) => resolve(code ?? 1));
          }),
        stop: async () => {
          if (runner.exitCode === null && runner.signalCode === null) runner.stdin!.end();
          await exited;
        },
      };
      running.push(booted);
      return booted;
    };

    const reportsUntil = async (until: (r: SignedHostReport) => boolean, description: string) => {
      const seen: SignedHostReport[] = [];
      await waitUntil(
        async () => {
          // Short polls: reports come every second, a long poll would rarely find the queue empty and return.
          const got = await drainQueue(sqs, queue.queueUrl, { waitTimeSeconds: 0 });
          for (const message of got) {
            const parsed = parseSignedHostReport(message.Body ?? "");
            if (!parsed.ok) throw new Error(parsed.problem);
            seen.push(parsed.signed);
          }
          return seen.some(until) || undefined;
        },
        { timeoutMs: 30_000, intervalMs: 200, description: `${description} (${readOutput()})` },
      );
      return seen;
    };

    return { root, tailscale, boot, reportsUntil };
  }

  return {
    get nsIp() {
      return nsIp;
    },
    launch,
    reachMetadataService: (user) => {
      const asUser = user ? ["setpriv", `--reuid=${user.uid}`, `--regid=${user.gid}`, "--init-groups"] : [];
      return run("ip", ["netns", "exec", netns, ...asUser, process.execPath, "-e", METADATA_PROBE]);
    },
  };
}

/** Waits for a line in the boot's event log (services start asynchronously). */
export async function eventually(b: Boot, line: string | RegExp, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  const matches = () => b.events().some((e) => (typeof line === "string" ? e === line : line.test(e)));
  while (!matches()) {
    if (Date.now() > deadline)
      throw new Error(`no "${String(line)}" in:\n${b.events().join("\n")}\n${b.output()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export function sunshineAt(credentials: { username: string; password: string }, fingerprint: string) {
  return new SunshineStreamingHost({
    urlTemplate: "https://{ip}:47990",
    credentials: async () => credentials,
    fingerprint: async () => fingerprint,
    timeoutMs: 3_000,
  });
}

/** The SHA-256 of the certificate a TLS server in the namespace presents (null when nothing listens). */
export function presentedCertificate(host: string, port: number): Promise<string | null> {
  return new Promise((resolve) => {
    const req = https.get({ host, port, path: "/", rejectUnauthorized: false, agent: false, timeout: 3_000 });
    req.on("socket", (socket) =>
      socket.on("secureConnect", () => {
        resolve(normalizeFingerprint((socket as TLSSocket).getPeerCertificate().fingerprint256) ?? null);
        req.destroy();
      }),
    );
    req.on("error", () => resolve(null));
    req.on("timeout", () => req.destroy());
  });
}

/** GET on the host's API with the pinned certificate checked by hand (the sessions adapter has no such call). */
export function pinnedGet(
  host: string,
  pathname: string,
  credentials: { username: string; password: string },
  fingerprint: string,
) {
  return new Promise<unknown>((resolve, reject) => {
    const req = https.get(
      {
        host,
        port: 47990,
        path: pathname,
        rejectUnauthorized: false,
        agent: false,
        auth: `${credentials.username}:${credentials.password}`,
      },
      (res) => {
        const presented = (res.socket as TLSSocket).getPeerCertificate().fingerprint256;
        if (normalizeFingerprint(presented) !== normalizeFingerprint(fingerprint))
          return reject(new Error(`host presented ${presented}`));
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve(JSON.parse(Buffer.concat(chunks).toString("utf8"))));
      },
    );
    req.on("error", reject);
  });
}
