import { spawn } from "node:child_process";
import { parseAllDocuments } from "yaml";
import { completeJobs, startKubeApiServer, type KubeApiServer } from "../harnesses/kube-apiserver-harness";
import { CHART_DIR, helm, valuesFile, type Manifest } from "./render-chart";

// The chart installed, upgraded and rolled back by helm on a real kube-apiserver (etcd from Debian, the server
// built from the Go module proxy by test/peers/kube-apiserver.sh) with the real CRDs of the Secrets Store CSI
// driver and the Prometheus Operator, in a namespace that enforces Pod Security "restricted". Only the API server
// runs: objects are validated and admitted, pods never start.

const NAMESPACE = "cgs";
const RELEASE = "cgs";
const WORKLOADS = ["gateway", "sessions", "billing", "accounts", "auth-proxy", "otel-collector"];
const SERVICES = WORKLOADS.filter((w) => w !== "otel-collector");

interface KubeObject extends Manifest {
  metadata: Manifest["metadata"] & { namespace?: string };
}
interface PodSpec {
  securityContext?: Record<string, unknown>;
  containers: { name: string; securityContext?: Record<string, unknown> }[];
  initContainers?: { name: string; securityContext?: Record<string, unknown> }[];
}
interface Status {
  message?: string;
}

let cluster: KubeApiServer;

interface HelmRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** Jobs the stand-in Job controller completed while helm waited for its hooks. */
  hookJobs: string[];
}

const RUNS_HOOKS = new Set(["install", "upgrade", "rollback"]);

/** Runs helm against the cluster; while it may wait for hooks, their Jobs are completed (see completeJobs). */
async function runHelm(args: string[]): Promise<HelmRun> {
  const jobs = RUNS_HOOKS.has(args[0]!) ? completeJobs(cluster, NAMESPACE) : undefined;
  const child = spawn(helm(), [...args, "--namespace", NAMESPACE], { env: cluster.helmEnv });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => (stdout += d));
  child.stderr.on("data", (d) => (stderr += d));
  const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
  await jobs?.stop();
  return { code, stdout, stderr, hookJobs: [...(jobs?.completed ?? [])] };
}

async function helmOk(args: string[]): Promise<HelmRun> {
  const run = await runHelm(args);
  if (run.code !== 0) throw new Error(`helm ${args.join(" ")} failed (${run.code}):\n${run.stderr}`);
  return run;
}

const parseObjects = (yaml: string): KubeObject[] =>
  parseAllDocuments(yaml)
    .map((d) => d.toJS() as KubeObject | null)
    .filter((m): m is KubeObject => m !== null);

/** What helm applied for the current revision: its manifest and its hooks. */
async function releaseObjects(): Promise<{ manifest: KubeObject[]; hooks: KubeObject[] }> {
  const [manifest, hooks] = await Promise.all([
    helmOk(["get", "manifest", RELEASE]),
    helmOk(["get", "hooks", RELEASE]),
  ]);
  return { manifest: parseObjects(manifest.stdout), hooks: parseObjects(hooks.stdout) };
}

const plurals = new Map<string, Map<string, string>>();
/** The REST path of an object, the resource name taken from the server's discovery. */
async function objectPath(o: KubeObject): Promise<string> {
  const base = o.apiVersion.includes("/") ? `/apis/${o.apiVersion}` : `/api/${o.apiVersion}`;
  if (!plurals.has(base)) {
    const discovery = await cluster.request<{ resources: { name: string; kind: string }[] }>("GET", base);
    plurals.set(
      base,
      new Map(discovery.body.resources.filter((r) => !r.name.includes("/")).map((r) => [r.kind, r.name])),
    );
  }
  const resource = plurals.get(base)!.get(o.kind);
  if (!resource) throw new Error(`the API server serves no ${o.kind} in ${o.apiVersion}`);
  return `${base}/namespaces/${NAMESPACE}/${resource}/${o.metadata.name}`;
}

/** Server-side apply as a dry run with strict field validation: unknown or duplicate fields are errors. */
async function strictDryRunApply(o: KubeObject) {
  const query = "dryRun=All&fieldManager=cgs-chart-test&fieldValidation=Strict&force=true";
  return cluster.request<Status>(
    "PATCH",
    `${await objectPath(o)}?${query}`,
    { ...o, metadata: { ...o.metadata, namespace: NAMESPACE } },
    "application/apply-patch+yaml",
  );
}

/** A pod made from a workload's template, created as a dry run: Pod Security admission judges pods only. */
function createPodDryRun(name: string, spec: PodSpec) {
  return cluster.request<Status>("POST", `/api/v1/namespaces/${NAMESPACE}/pods?dryRun=All`, {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: `${name}-template-check` },
    spec,
  });
}

interface Workload {
  image: string;
  resources: unknown;
  autoscaling: { minReplicas: number; maxReplicas: number; cpuPercent: number };
  disruptionBudget: { minAvailable?: number | string; maxUnavailable?: number | string };
}

/** What a platform team reads off each workload: image, sizes, replica floor and ceiling, disruption budget. */
function summarize(objects: KubeObject[]): {
  workloads: Record<string, Workload>;
  env: Record<string, unknown>;
} {
  const of = (kind: string, name: string) =>
    objects.find((o) => o.kind === kind && o.metadata.name === `${RELEASE}-${name}`);
  const workloads: Record<string, Workload> = {};
  for (const name of WORKLOADS) {
    const deployment = of("Deployment", name)?.spec as {
      template: { spec: { containers: Record<string, unknown>[] } };
    };
    const hpa = of("HorizontalPodAutoscaler", name)?.spec as {
      minReplicas: number;
      maxReplicas: number;
      metrics: { resource: { target: { averageUtilization: number } } }[];
    };
    const pdb = of("PodDisruptionBudget", name)?.spec as Workload["disruptionBudget"];
    const container = deployment.template.spec.containers[0]!;
    workloads[name] = {
      image: container.image as string,
      resources: container.resources,
      autoscaling: {
        minReplicas: hpa.minReplicas,
        maxReplicas: hpa.maxReplicas,
        cpuPercent: hpa.metrics[0]!.resource.target.averageUtilization,
      },
      disruptionBudget: { minAvailable: pdb.minAvailable, maxUnavailable: pdb.maxUnavailable },
    };
  }
  const env = Object.fromEntries(SERVICES.map((name) => [name, of("ConfigMap", name)?.data]));
  return { workloads, env };
}

/** The same summary read back from the API server. */
async function clusterState() {
  const get = async (apiPath: string, resource: string) =>
    (await cluster.request<{ items: KubeObject[] }>("GET", `${apiPath}/namespaces/${NAMESPACE}/${resource}`))
      .body.items;
  const withKind = (kind: string, items: KubeObject[]) => items.map((o) => ({ ...o, kind }));
  return summarize([
    ...withKind("Deployment", await get("/apis/apps/v1", "deployments")),
    ...withKind("HorizontalPodAutoscaler", await get("/apis/autoscaling/v2", "horizontalpodautoscalers")),
    ...withKind("PodDisruptionBudget", await get("/apis/policy/v1", "poddisruptionbudgets")),
    ...withKind("ConfigMap", await get("/api/v1", "configmaps")),
  ]);
}

const WARNING = /warning|^W\d{4} /im;
const chartArgs = (env: string) => [RELEASE, CHART_DIR, "-f", valuesFile(env), "--timeout", "60s"];

let install: HelmRun;
let staging: Awaited<ReturnType<typeof clusterState>>;

beforeAll(async () => {
  // Cold, the first run builds kube-apiserver (test/peers/kube-apiserver.sh; `npm test` runs it before jest).
  cluster = await startKubeApiServer();
  await cluster.createNamespace(NAMESPACE, {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
    // Workload objects are not pods: for them the server only warns, and a warning fails the tests below.
    "pod-security.kubernetes.io/warn": "restricted",
    "pod-security.kubernetes.io/warn-version": "latest",
  });
  install = await helmOk(["install", ...chartArgs("staging")]);
  staging = await clusterState();
}, 45 * 60_000);
afterAll(() => cluster?.stop());

describe("the chart on a real Kubernetes API server, in a namespace enforcing Pod Security restricted", () => {
  test("when installed with the staging values, then the server admits and stores every object without a warning", async () => {
    expect(install.stderr).not.toMatch(WARNING);
    expect(install.stdout).toMatch(/STATUS: deployed/);
    // The database bootstrap is a pre-install hook Job; helm went on only once it completed.
    expect(install.hookJobs).toEqual([`${RELEASE}-db-bootstrap`]);

    const { manifest, hooks } = await releaseObjects();
    const kinds = new Set(manifest.map((o) => o.kind));
    for (const kind of [
      "Deployment",
      "SecretProviderClass",
      "ServiceMonitor",
      "PrometheusRule",
      "NetworkPolicy",
    ]) {
      expect(kinds).toContain(kind);
    }
    // The hook Job is deleted once it succeeded (hook-delete-policy); every other object must be stored.
    const stored = [...manifest, ...hooks.filter((o) => o.kind !== "Job")];
    const missing: string[] = [];
    for (const o of stored) {
      const got = await cluster.request("GET", await objectPath(o));
      if (got.status !== 200) missing.push(`${o.kind}/${o.metadata.name}: ${got.status}`);
    }
    expect(missing).toEqual([]);
    expect(stored.length).toBeGreaterThanOrEqual(50);
  });

  test("when every object of the release is applied again with strict field validation, then none has an unknown field; a misspelt one is refused", async () => {
    const { manifest, hooks } = await releaseObjects();
    const refused: string[] = [];
    for (const o of [...manifest, ...hooks]) {
      const applied = await strictDryRunApply(o);
      if (applied.status !== 200 && applied.status !== 201) {
        refused.push(`${o.kind}/${o.metadata.name}: ${applied.status} ${applied.body.message}`);
      }
    }
    expect(refused).toEqual([]);

    const gateway = manifest.find(
      (o) => o.kind === "Deployment" && o.metadata.name === `${RELEASE}-gateway`,
    )!;
    const misspelt = structuredClone(gateway);
    const container = (misspelt.spec as { template: { spec: PodSpec } }).template.spec.containers[0]!;
    (container as Record<string, unknown>).securityContxt = container.securityContext;
    const answer = await strictDryRunApply(misspelt);
    expect(answer.status).toBeGreaterThanOrEqual(400);
    expect(answer.body.message).toContain("securityContxt");
  });

  test("when each workload's pod template becomes a pod, then restricted admits it; without the chart's securityContext it is refused", async () => {
    const { manifest, hooks } = await releaseObjects();
    const templates = [...manifest, ...hooks]
      .filter((o) => o.kind === "Deployment" || o.kind === "Job")
      .map((o) => ({
        name: o.metadata.name,
        spec: (o.spec as { template: { spec: PodSpec } }).template.spec,
      }));
    expect(templates.map((t) => t.name).sort()).toEqual(
      [...WORKLOADS, "db-bootstrap"].map((w) => `${RELEASE}-${w}`).sort(),
    );
    const refused: string[] = [];
    for (const { name, spec } of templates) {
      const pod = await createPodDryRun(name, spec);
      if (pod.status !== 201) refused.push(`${name}: ${pod.status} ${pod.body.message}`);
    }
    expect(refused).toEqual([]);

    const bare = structuredClone(templates[0]!.spec);
    delete bare.securityContext;
    for (const c of [...bare.containers, ...(bare.initContainers ?? [])]) delete c.securityContext;
    const pod = await createPodDryRun(templates[0]!.name, bare);
    expect(pod.status).toBe(403);
    expect(pod.body.message).toMatch(/violates PodSecurity "restricted:latest"/);
  });

  test("when upgraded to the prod values, then replica floors and ceilings, sizes, disruption budgets, images and settings become prod's", async () => {
    const upgrade = await helmOk(["upgrade", ...chartArgs("prod")]);
    expect(upgrade.stderr).not.toMatch(WARNING);
    expect(upgrade.hookJobs).toEqual([`${RELEASE}-db-bootstrap`]);
    const prod = await clusterState();

    expect(prod.workloads.gateway!.autoscaling).toEqual({ minReplicas: 3, maxReplicas: 10, cpuPercent: 65 });
    for (const name of SERVICES.filter((s) => s !== "gateway")) {
      expect(prod.workloads[name]!.autoscaling).toEqual({ minReplicas: 2, maxReplicas: 10, cpuPercent: 65 });
    }
    expect(prod.workloads["otel-collector"]!.autoscaling).toMatchObject({ minReplicas: 2, maxReplicas: 4 });
    for (const name of SERVICES) {
      expect(prod.workloads[name]).toMatchObject({
        image: expect.stringContaining("/cgs-prod/"),
        resources: { requests: { cpu: "250m", memory: "256Mi" }, limits: { cpu: "1", memory: "512Mi" } },
        // The three-way merge removed staging's maxUnavailable: a budget with both is invalid.
        disruptionBudget: { minAvailable: 1, maxUnavailable: undefined },
      });
    }
    expect(prod.env.gateway).toMatchObject({ PUBLIC_BASE_URL: "https://play.example.com" });
    expect(prod.env.sessions).toMatchObject({ CLOUD_TAG_PREFIX: "cgs-prod", QUEUE_NAME_PREFIX: "prod-" });
    // Nothing else drifted: the server holds exactly what helm rendered for prod.
    expect(prod).toEqual(summarize((await releaseObjects()).manifest));
  });

  test("when rolled back, then staging's replica floors, sizes, budgets, images and settings return", async () => {
    const rollback = await helmOk(["rollback", RELEASE, "1", "--timeout", "60s"]);
    expect(rollback.stderr).not.toMatch(WARNING);
    const after = await clusterState();
    expect(after).toEqual(staging);
    expect(after.workloads.gateway).toMatchObject({
      autoscaling: { minReplicas: 1, maxReplicas: 3, cpuPercent: 70 },
      disruptionBudget: { minAvailable: undefined, maxUnavailable: 1 },
      image: expect.stringContaining("/cgs-staging/"),
    });
    const history = JSON.parse((await helmOk(["history", RELEASE, "-o", "json"])).stdout) as {
      revision: number;
      status: string;
      description: string;
    }[];
    expect(history.map((h) => [h.revision, h.status])).toEqual([
      [1, "superseded"],
      [2, "superseded"],
      [3, "deployed"],
    ]);
    expect(history[2]!.description).toBe("Rollback to 1");
  });
});
