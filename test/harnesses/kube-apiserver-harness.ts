import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import {
  closeSync,
  existsSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import https from "node:https";
import os from "node:os";
import path from "node:path";
import { freePort } from "@cgs/shared/testing/ports";
import { waitUntil } from "@cgs/shared/testing/queue";

/**
 * A real Kubernetes API server for chart tests: Debian's etcd and a kube-apiserver built from the Go module proxy
 * (test/peers/kube-apiserver.sh), on free ports in a directory of their own. It validates and admits objects; no
 * scheduler, controller or kubelet runs, so pods are never started.
 */

const REPO_ROOT = path.resolve(__dirname, "..", "..");

export interface KubeAnswer<T = Record<string, unknown>> {
  status: number;
  body: T;
}

export interface KubeApiServer {
  /** https://127.0.0.1:<port> */
  server: string;
  gitVersion: string;
  /** A kubeconfig for helm and kubectl, signed in as a member of system:masters. */
  kubeconfig: string;
  /** Environment for helm: this kubeconfig, and caches of this run only (discovery is cached per host:port). */
  helmEnv: NodeJS.ProcessEnv;
  request<T = Record<string, unknown>>(
    method: string,
    apiPath: string,
    body?: unknown,
    contentType?: string,
  ): Promise<KubeAnswer<T>>;
  /** Creates a namespace with these labels. */
  createNamespace(name: string, labels: Record<string, string>): Promise<void>;
  stop(): Promise<void>;
}

/** Installs etcd, builds kube-apiserver and fetches the CRDs when missing (cached); returns the script's exports. */
export function kubeTools(): Record<string, string> {
  const out = execFileSync("bash", [path.join(REPO_ROOT, "test", "peers", "kube-apiserver.sh")], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
    timeout: 40 * 60_000,
  });
  return Object.fromEntries(
    out
      .split("\n")
      .map((line) => /^export (\w+)=(.*)$/.exec(line))
      .filter((m): m is RegExpExecArray => m !== null)
      .map((m) => [m[1]!, m[2]!]),
  );
}

function startLogged(bin: string, args: string[], logFile: string): ChildProcess {
  const fd = openSync(logFile, "a");
  // Its own process group, so stop() ends it and nothing it started outlives the test.
  const child = spawn(bin, args, { stdio: ["ignore", fd, fd], detached: true });
  closeSync(fd);
  return child;
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  process.kill(-child.pid!, "SIGTERM");
  const timer = setTimeout(() => process.kill(-child.pid!, "SIGKILL"), 10_000);
  await exited;
  clearTimeout(timer);
}

const tail = (file: string) =>
  existsSync(file) ? readFileSync(file, "utf8").split("\n").slice(-30).join("\n") : "";

export async function startKubeApiServer(): Promise<KubeApiServer> {
  const tools = kubeTools();
  const dir = mkdtempSync(path.join(os.tmpdir(), "cgs-kube-"));
  const [etcdPort, etcdPeerPort, apiPort] = [await freePort(), await freePort(), await freePort()];
  const etcdUrl = `http://127.0.0.1:${etcdPort}`;
  const peerUrl = `http://127.0.0.1:${etcdPeerPort}`;
  const etcd = startLogged(
    tools.ETCD_BIN!,
    [
      "--name=cgs",
      `--data-dir=${path.join(dir, "etcd")}`,
      `--listen-client-urls=${etcdUrl}`,
      `--advertise-client-urls=${etcdUrl}`,
      `--listen-peer-urls=${peerUrl}`,
      `--initial-advertise-peer-urls=${peerUrl}`,
      `--initial-cluster=cgs=${peerUrl}`,
    ],
    path.join(dir, "etcd.log"),
  );

  const keys = generateKeyPairSync("rsa", {
    modulusLength: 2048,
    publicKeyEncoding: { type: "spki", format: "pem" },
    privateKeyEncoding: { type: "pkcs8", format: "pem" },
  });
  writeFileSync(path.join(dir, "sa.pub"), keys.publicKey);
  writeFileSync(path.join(dir, "sa.key"), keys.privateKey, { mode: 0o600 });
  const token = randomBytes(24).toString("hex");
  writeFileSync(path.join(dir, "tokens.csv"), `${token},admin,admin,system:masters\n`, { mode: 0o600 });
  const certDir = path.join(dir, "certs");
  const apiLog = path.join(dir, "kube-apiserver.log");
  const apiserver = startLogged(
    tools.KUBE_APISERVER_BIN!,
    [
      `--etcd-servers=${etcdUrl}`,
      "--bind-address=127.0.0.1",
      `--secure-port=${apiPort}`,
      // Loopback is refused as the advertised address unless nothing publishes it as an endpoint.
      "--advertise-address=127.0.0.1",
      "--endpoint-reconciler-type=none",
      `--cert-dir=${certDir}`,
      "--service-cluster-ip-range=10.96.0.0/16",
      "--service-account-issuer=https://kubernetes.default.svc",
      `--service-account-key-file=${path.join(dir, "sa.pub")}`,
      `--service-account-signing-key-file=${path.join(dir, "sa.key")}`,
      `--token-auth-file=${path.join(dir, "tokens.csv")}`,
      "--authorization-mode=RBAC",
      "--enable-admission-plugins=PodSecurity",
    ],
    apiLog,
  );
  const server = `https://127.0.0.1:${apiPort}`;
  const caFile = path.join(certDir, "apiserver.crt");
  let ca: Buffer | undefined;

  const request = <T>(method: string, apiPath: string, body?: unknown, contentType = "application/json") =>
    new Promise<KubeAnswer<T>>((resolve, reject) => {
      const payload = body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body);
      const req = https.request(
        `${server}${apiPath}`,
        {
          method,
          ca,
          headers: {
            authorization: `Bearer ${token}`,
            accept: "application/json",
            ...(payload === undefined ? {} : { "content-type": contentType }),
          },
        },
        (res) => {
          let text = "";
          res.setEncoding("utf8");
          res.on("data", (d: string) => (text += d));
          res.on("end", () => {
            let parsed: unknown = text;
            try {
              parsed = JSON.parse(text);
            } catch {
              // /readyz and friends answer plain text.
            }
            resolve({ status: res.statusCode ?? 0, body: parsed as T });
          });
        },
      );
      req.on("error", reject);
      req.end(payload);
    });

  const stop = async () => {
    await stopChild(apiserver);
    await stopChild(etcd);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitUntil(
      async () => {
        for (const [name, child, log] of [
          ["etcd", etcd, path.join(dir, "etcd.log")],
          ["kube-apiserver", apiserver, apiLog],
        ] as const) {
          if (child.exitCode !== null)
            throw new Error(`${name} exited with ${child.exitCode}:\n${tail(log)}`);
        }
        if (!existsSync(caFile)) return false;
        ca ??= readFileSync(caFile);
        const ready = await request<string>("GET", "/readyz").catch(() => undefined);
        return ready?.status === 200;
      },
      { timeoutMs: 60_000, intervalMs: 200, description: `kube-apiserver on ${server}` },
    );
  } catch (err) {
    await stop();
    throw err;
  }

  const kubeconfig = path.join(dir, "kubeconfig");
  writeFileSync(
    kubeconfig,
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "cgs", cluster: { server, "certificate-authority": caFile } }],
      users: [{ name: "admin", user: { token } }],
      contexts: [{ name: "cgs", context: { cluster: "cgs", user: "admin" } }],
      "current-context": "cgs",
    }),
    { mode: 0o600 },
  );
  const cluster: KubeApiServer = {
    server,
    gitVersion: tools.KUBE_GIT_VERSION!,
    kubeconfig,
    helmEnv: {
      ...process.env,
      KUBECONFIG: kubeconfig,
      KUBECACHEDIR: path.join(dir, "kube-cache"),
      HELM_CACHE_HOME: path.join(dir, "helm", "cache"),
      HELM_CONFIG_HOME: path.join(dir, "helm", "config"),
      HELM_DATA_HOME: path.join(dir, "helm", "data"),
    },
    request,
    async createNamespace(name, labels) {
      const created = await request("POST", "/api/v1/namespaces", {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name, labels },
      });
      if (created.status !== 201) throw new Error(`namespace ${name}: ${JSON.stringify(created.body)}`);
    },
    stop,
  };
  await installCrds(cluster, tools.KUBE_CRDS_DIR!).catch(async (err: unknown) => {
    await stop();
    throw err;
  });
  return cluster;
}

/** The add-on CRDs the chart's objects need (SecretProviderClass, ServiceMonitor, PrometheusRule), established. */
async function installCrds(cluster: KubeApiServer, crdsDir: string): Promise<void> {
  const crdPath = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
  for (const file of readdirSync(crdsDir).filter((f) => f.endsWith(".yaml"))) {
    const yaml = readFileSync(path.join(crdsDir, file), "utf8");
    const created = await cluster.request<{ metadata: { name: string } }>(
      "POST",
      crdPath,
      yaml,
      "application/yaml",
    );
    if (created.status !== 201) throw new Error(`CRD ${file}: ${JSON.stringify(created.body)}`);
    await waitUntil(
      async () => {
        const crd = await cluster.request<{ status?: { conditions?: { type: string; status: string }[] } }>(
          "GET",
          `${crdPath}/${created.body.metadata.name}`,
        );
        return crd.body.status?.conditions?.some((c) => c.type === "Established" && c.status === "True");
      },
      { timeoutMs: 30_000, description: `CRD ${file} established` },
    );
  }
}

interface JobList {
  items: {
    metadata: { name: string };
    status?: { conditions?: { type: string; status: string }[] };
  }[];
}

/**
 * Stand-in for the Job controller and a kubelet, which cannot run here: helm waits for its pre-install and
 * pre-upgrade hook Jobs to complete, so every Job created in the namespace is marked succeeded at once.
 * Returns the names of the Jobs it completed so far and a function that stops watching.
 */
export function completeJobs(
  cluster: KubeApiServer,
  namespace: string,
): { completed: string[]; stop(): Promise<void> } {
  let running = true;
  const completed: string[] = [];
  const loop = (async () => {
    while (running) {
      const jobs = await cluster.request<JobList>("GET", `/apis/batch/v1/namespaces/${namespace}/jobs`);
      for (const job of jobs.body.items ?? []) {
        if (job.status?.conditions?.some((c) => c.type === "Complete")) continue;
        const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
        await cluster.request(
          "PATCH",
          `/apis/batch/v1/namespaces/${namespace}/jobs/${job.metadata.name}/status`,
          {
            status: {
              startTime: now,
              completionTime: now,
              succeeded: 1,
              conditions: [
                { type: "SuccessCriteriaMet", status: "True", lastTransitionTime: now },
                { type: "Complete", status: "True", lastTransitionTime: now },
              ],
            },
          },
          "application/merge-patch+json",
        );
        completed.push(job.metadata.name);
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  })();
  // A failed request ends the loop; stop() reports it instead of an unhandled rejection.
  const ended = loop.then(
    () => undefined,
    (err: unknown) => err,
  );
  return {
    completed,
    async stop() {
      running = false;
      const err = await ended;
      if (err) throw err;
    },
  };
}
