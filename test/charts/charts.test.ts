import * as path from "node:path";
import { parseDocument } from "yaml";
import { STREAMING_TCP_PORTS, STREAMING_UDP_PORT_RANGE, headscalePolicy } from "@cgs/shared";
import { CHART_DIR, lint, render, runHelm, valuesFile, KUBE_VERSION, type Manifest } from "./render-chart";

const SERVICES = {
  gateway: 8080,
  sessions: 8101,
  billing: 8102,
  accounts: 8103,
  "auth-proxy": 8104,
} as const;
const SERVICE_NAMES = Object.keys(SERVICES);
const METRICS_PORT = 9464;
/**
 * Synchronous calls between services the code makes (sessions -> billing/accounts for start
 * authorization and account status, billing -> accounts for the deletion-grace check). Everything
 * else reaches a service only through the gateway.
 */
const INTERNAL_CALLS: Record<string, string[]> = { sessions: ["billing", "accounts"], billing: ["accounts"] };

interface Container {
  name: string;
  ports?: { name: string; containerPort: number }[];
  livenessProbe?: { httpGet?: { path: string; port: string | number } };
  readinessProbe?: { httpGet?: { path: string; port: string | number } };
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: {
    runAsNonRoot?: boolean;
    readOnlyRootFilesystem?: boolean;
    allowPrivilegeEscalation?: boolean;
    capabilities?: { drop?: string[] };
  };
}
interface PodSpec {
  securityContext?: { runAsNonRoot?: boolean; runAsUser?: number };
  serviceAccountName?: string;
  containers: Container[];
}
interface PolicyPeer {
  podSelector?: { matchLabels?: Record<string, string> };
  namespaceSelector?: unknown;
  ipBlock?: { cidr: string };
}
interface PolicyRule {
  from?: PolicyPeer[];
  to?: PolicyPeer[];
  ports?: { port: number }[];
}

const byKind = (ms: Manifest[], kind: string) => ms.filter((m) => m.kind === kind);
const named = (ms: Manifest[], kind: string, name: string) => {
  const m = ms.find((x) => x.kind === kind && x.metadata.name === name);
  if (!m) throw new Error(`${kind} ${name} not rendered`);
  return m;
};
const podSpec = (m: Manifest): PodSpec => (m.spec as { template: { spec: PodSpec } }).template.spec;

/** Could a pod of `from` open a connection to `to` on its port, per the rendered NetworkPolicies? */
function allowed(ms: Manifest[], from: string, to: string): boolean {
  const policy = named(ms, "NetworkPolicy", `cgs-${to}`);
  const rules = ((policy.spec as { ingress?: PolicyRule[] }).ingress ?? []) as PolicyRule[];
  const port = SERVICES[to as keyof typeof SERVICES];
  return rules.some(
    (r) =>
      (r.ports ?? []).some((p) => p.port === port) &&
      (r.from ?? []).some(
        (peer) =>
          peer.ipBlock?.cidr === "0.0.0.0/0" ||
          (peer.podSelector?.matchLabels?.["app.kubernetes.io/name"] === from && !peer.namespaceSelector),
      ),
  );
}

describe.each(["staging", "prod"])("chart cgs-platform with %s values", (env) => {
  let manifests: Manifest[];
  beforeAll(() => {
    manifests = render(env);
  }, 15 * 60_000);

  it("when linted strictly, then helm reports no errors", () => {
    expect(lint(env)).toMatch(/1 chart\(s\) linted, 0 chart\(s\) failed/);
  });

  it("when rendered, then every deployable has its Deployment, Service, ServiceAccount, ConfigMap, HPA, PDB and NetworkPolicy", () => {
    for (const name of [...SERVICE_NAMES, "otel-collector"]) {
      for (const kind of [
        "Deployment",
        "Service",
        "ServiceAccount",
        "ConfigMap",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
        "NetworkPolicy",
      ]) {
        expect(() => named(manifests, kind, `cgs-${name}`)).not.toThrow();
      }
    }
    const ingress = named(manifests, "Ingress", "cgs-gateway");
    expect(ingress.metadata.annotations?.["alb.ingress.kubernetes.io/certificate-arn"]).toMatch(
      /^arn:aws:acm:/,
    );
    expect(JSON.stringify(ingress.spec)).toContain('"name":"cgs-gateway"');
    expect((ingress.spec as { tls: { hosts: string[] }[] }).tls[0]?.hosts).toHaveLength(1);
  });

  it("when rendered, then each service probes /healthz for liveness and /readyz for readiness on its port", () => {
    for (const [name, port] of Object.entries(SERVICES)) {
      const [c] = podSpec(named(manifests, "Deployment", `cgs-${name}`)).containers;
      expect(c?.ports).toEqual([
        expect.objectContaining({ name: "http", containerPort: port }),
        expect.objectContaining({ name: "metrics", containerPort: METRICS_PORT }),
      ]);
      expect(c?.livenessProbe?.httpGet).toEqual({ path: "/healthz", port: "http" });
      expect(c?.readinessProbe?.httpGet).toEqual({ path: "/readyz", port: "http" });
    }
  });

  it("when rendered, then every container has probes, requests and limits, and runs non-root, read-only, without capabilities", () => {
    const workloads = [...byKind(manifests, "Deployment"), ...byKind(manifests, "Job")];
    expect(workloads.length).toBeGreaterThanOrEqual(SERVICE_NAMES.length + 1);
    for (const w of workloads) {
      const spec = podSpec(w);
      expect(spec.securityContext?.runAsNonRoot).toBe(true);
      expect(spec.securityContext?.runAsUser).toBeGreaterThan(0);
      for (const c of spec.containers) {
        const where = `${w.kind} ${w.metadata.name}/${c.name}`;
        if (w.kind === "Deployment") {
          expect({ where, liveness: !!c.livenessProbe, readiness: !!c.readinessProbe }).toEqual({
            where,
            liveness: true,
            readiness: true,
          });
        }
        expect({ where, r: c.resources }).toEqual({
          where,
          r: {
            requests: { cpu: expect.any(String), memory: expect.any(String) },
            limits: { cpu: expect.any(String), memory: expect.any(String) },
          },
        });
        expect({ where, sc: c.securityContext }).toEqual({
          where,
          sc: expect.objectContaining({
            runAsNonRoot: true,
            readOnlyRootFilesystem: true,
            allowPrivilegeEscalation: false,
            capabilities: { drop: ["ALL"] },
          }),
        });
      }
    }
  });

  it("when rendered, then each service account carries its own IAM role", () => {
    const roles = SERVICE_NAMES.map(
      (name) =>
        named(manifests, "ServiceAccount", `cgs-${name}`).metadata.annotations?.[
          "eks.amazonaws.com/role-arn"
        ],
    );
    for (const r of roles) expect(r).toMatch(/^arn:aws:iam::\d{12}:role\//);
    expect(new Set(roles).size).toBe(SERVICE_NAMES.length);
    for (const name of SERVICE_NAMES) {
      expect(podSpec(named(manifests, "Deployment", `cgs-${name}`)).serviceAccountName).toBe(`cgs-${name}`);
    }
  });

  it("when network policies apply, then only the gateway and declared internal callers reach services, and only the load balancer reaches the gateway", () => {
    for (const to of SERVICE_NAMES.filter((n) => n !== "gateway")) {
      for (const from of SERVICE_NAMES) {
        const expected = from === "gateway" || (INTERNAL_CALLS[from] ?? []).includes(to);
        expect({ from, to, allowed: allowed(manifests, from, to) }).toEqual({ from, to, allowed: expected });
      }
      // The metrics port admits the monitoring namespace (test/charts/observability.test.ts); the API port is checked here.
      const rules = (
        named(manifests, "NetworkPolicy", `cgs-${to}`).spec as { ingress: PolicyRule[] }
      ).ingress.filter((r) => !(r.ports ?? []).some((p) => p.port === METRICS_PORT));
      expect(
        rules.flatMap((r) => r.from ?? []).every((p) => p.podSelector && !p.ipBlock && !p.namespaceSelector),
      ).toBe(true);
    }
    expect(allowed(manifests, "gateway", "auth-proxy")).toBe(true);
    const gatewayRules = (
      named(manifests, "NetworkPolicy", "cgs-gateway").spec as { ingress: PolicyRule[] }
    ).ingress.filter((r) => !(r.ports ?? []).some((p) => p.port === METRICS_PORT));
    const gatewayPeers = gatewayRules.flatMap((r) => r.from ?? []);
    expect(gatewayPeers.length).toBeGreaterThan(0);
    expect(gatewayPeers.every((p) => p.ipBlock && p.ipBlock.cidr !== "0.0.0.0/0")).toBe(true);
    for (const policy of byKind(manifests, "NetworkPolicy")) {
      expect((policy.spec as { policyTypes: string[] }).policyTypes).toEqual(["Ingress", "Egress"]);
    }
  });

  it("when network policies apply, then services reach only DNS, the collector and their own dependencies", () => {
    for (const name of SERVICE_NAMES.filter((n) => n !== "gateway")) {
      const egress = (named(manifests, "NetworkPolicy", `cgs-${name}`).spec as { egress: PolicyRule[] })
        .egress;
      const podTargets = egress
        .flatMap((r) => r.to ?? [])
        .map(
          (p) =>
            p.podSelector?.matchLabels?.["app.kubernetes.io/name"] ?? p.podSelector?.matchLabels?.["k8s-app"],
        )
        .filter((x): x is string => !!x);
      expect(podTargets.sort()).toEqual(
        ["kube-dns", "otel-collector", ...(INTERNAL_CALLS[name] ?? [])].sort(),
      );
      const ports = egress.flatMap((r) => (r.ports ?? []).map((p) => p.port));
      for (const [other, port] of Object.entries(SERVICES)) {
        if (!(INTERNAL_CALLS[name] ?? []).includes(other))
          expect({ name, other, open: ports.includes(port) }).toEqual({
            name,
            other,
            open: false,
          });
      }
      expect(ports).toContain(5432);
      expect(ports).not.toContain(6379);
    }
    const gatewayEgress = (named(manifests, "NetworkPolicy", "cgs-gateway").spec as { egress: PolicyRule[] })
      .egress;
    expect(gatewayEgress.flatMap((r) => (r.ports ?? []).map((p) => p.port))).not.toContain(5432);
  });

  it("when the gateway is configured, then it knows every upstream service by its cluster DNS name", () => {
    const data = named(manifests, "ConfigMap", "cgs-gateway").data ?? {};
    expect(data).toMatchObject({
      SESSIONS_URL: "http://cgs-sessions:8101",
      BILLING_URL: "http://cgs-billing:8102",
      ACCOUNTS_URL: "http://cgs-accounts:8103",
      AUTH_PROXY_URL: "http://cgs-auth-proxy:8104",
      PORT: "8080",
      HOST: "0.0.0.0",
      NODE_ENV: "production",
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://cgs-otel-collector:4318",
    });
  });

  it("when Redis is down, then each gateway can count its ready peers through a headless Service", () => {
    const peers = named(manifests, "Service", "cgs-gateway-peers");
    const gateway = named(manifests, "Deployment", "cgs-gateway");
    expect(peers.spec).toMatchObject({ clusterIP: "None", publishNotReadyAddresses: false });
    const selector = (peers.spec as { selector: Record<string, string> }).selector;
    const podLabels = (gateway.spec as { template: { metadata: { labels: Record<string, string> } } })
      .template.metadata.labels;
    expect(podLabels).toMatchObject(selector);
    const data = named(manifests, "ConfigMap", "cgs-gateway").data ?? {};
    expect(data.GATEWAY_PEERS_DNS).toBe("cgs-gateway-peers.cgs.svc.cluster.local");
  });

  it("when the gateway runs under its memory limit, then Node keeps a young generation sized for its load", () => {
    // Sized from a 512Mi limit, V8's semi-space is about 1 MB and the gateway's CPU goes to scavenges.
    const data = named(manifests, "ConfigMap", "cgs-gateway").data ?? {};
    expect(data.NODE_OPTIONS).toMatch(/--max-semi-space-size=\d+/);
  });
});

describe("chart cgs-platform replicas per environment", () => {
  const effectiveMinReplicas = (ms: Manifest[]) =>
    byKind(ms, "Deployment").map((d) => {
      const hpa = byKind(ms, "HorizontalPodAutoscaler").find(
        (h) => (h.spec as { scaleTargetRef: { name: string } }).scaleTargetRef.name === d.metadata.name,
      );
      const min = hpa
        ? (hpa.spec as { minReplicas: number }).minReplicas
        : ((d.spec as { replicas?: number }).replicas ?? 1);
      const pdb = byKind(ms, "PodDisruptionBudget").some((p) => p.metadata.name === d.metadata.name);
      return { name: d.metadata.name, min, pdb };
    });

  it("when rendered for prod, then every deployment keeps at least two replicas and has a PDB", () => {
    for (const d of effectiveMinReplicas(render("prod"))) {
      expect(d).toEqual({ name: d.name, min: expect.any(Number), pdb: true });
      expect({ name: d.name, atLeastTwo: d.min >= 2 }).toEqual({ name: d.name, atLeastTwo: true });
    }
  });

  it("when a prod service is set to one replica, then the replica check notices", () => {
    const ms = render("prod", [
      "--set",
      "services.billing.replicas=1",
      "--set",
      "serviceDefaults.autoscaling.minReplicas=1",
    ]);
    expect(effectiveMinReplicas(ms).find((d) => d.name === "cgs-billing")?.min).toBe(1);
  });

  it("when a service names an unknown dependency, then rendering fails instead of opening the policy", () => {
    expect(() =>
      runHelm([
        "template",
        "cgs",
        CHART_DIR,
        "--kube-version",
        KUBE_VERSION,
        "-f",
        valuesFile("staging"),
        "--set",
        "services.billing.egress.services={sessionz}",
      ]),
    ).toThrow(/unknown deployable "sessionz"/);
  });
});

describe("chart cgs-platform with the self-hosted private network (Headscale)", () => {
  const headscaleArgs = [
    "--set",
    "headscale.enabled=true",
    "--set",
    "headscale.host=vpn.example.com",
    "--set",
    "headscale.database.host=cgs-prod.abc.eu-west-1.rds.amazonaws.com",
    "--set",
    "headscale.secret=arn:aws:secretsmanager:eu-west-1:123456789012:secret:cgs-prod/headscale-AbCdEf",
    "--set",
    "headscale.databaseSecret=arn:aws:secretsmanager:eu-west-1:123456789012:secret:cgs-prod/headscale/database-AbCdEf",
  ];
  let manifests: Manifest[];
  beforeAll(() => {
    manifests = render("prod", headscaleArgs);
  }, 15 * 60_000);

  it("when enabled, then Headscale runs hardened on PostgreSQL with the platform's fixed policy and a persistent noise key", () => {
    const config = named(manifests, "ConfigMap", "cgs-headscale").data ?? {};
    expect(JSON.parse(config["policy.json"]!)).toEqual(
      headscalePolicy({ tcpPorts: STREAMING_TCP_PORTS, udpPortRange: STREAMING_UDP_PORT_RANGE }),
    );
    const yaml = parseDocument(config["config.yaml"]!).toJS() as {
      server_url: string;
      database: { type: string; postgres: { host: string } };
      noise: { private_key_path: string };
      policy: { mode: string };
    };
    expect(yaml).toMatchObject({
      server_url: "https://vpn.example.com",
      database: { type: "postgres", postgres: { host: "cgs-prod.abc.eu-west-1.rds.amazonaws.com" } },
      policy: { mode: "file" },
    });
    const spec = podSpec(named(manifests, "Deployment", "cgs-headscale"));
    const container = spec.containers[0]!;
    expect(spec.securityContext?.runAsNonRoot).toBe(true);
    expect(container.securityContext).toMatchObject({
      runAsNonRoot: true,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ["ALL"] },
    });
    expect(container.livenessProbe?.httpGet?.path).toBe("/health");
    expect(container.resources?.limits).toBeDefined();
    const mounts = (container as { volumeMounts?: Array<{ mountPath: string }> }).volumeMounts ?? [];
    expect(mounts.map((m) => m.mountPath)).toContain(path.posix.dirname(yaml.noise.private_key_path));
  });

  it("when enabled, then it is served on its own host name, and only the load balancer and sessions reach its port", () => {
    const ingress = named(manifests, "Ingress", "cgs-headscale").spec as {
      rules: Array<{ host: string }>;
      tls: Array<{ hosts: string[] }>;
    };
    expect(ingress.rules.map((r) => r.host)).toEqual(["vpn.example.com"]);
    expect(ingress.tls[0]!.hosts).toEqual(["vpn.example.com"]);
    const rules = (named(manifests, "NetworkPolicy", "cgs-headscale").spec as { ingress: PolicyRule[] })
      .ingress;
    const onApi = rules
      .filter((r) => (r.ports ?? []).some((p) => p.port === 8080))
      .flatMap((r) => r.from ?? []);
    expect(onApi.map((p) => p.podSelector?.matchLabels?.["app.kubernetes.io/name"]).filter(Boolean)).toEqual([
      "sessions",
    ]);
    expect(onApi.some((p) => p.ipBlock?.cidr === "0.0.0.0/0")).toBe(false);
    const sessionsEgress = (
      named(manifests, "NetworkPolicy", "cgs-sessions").spec as { egress: PolicyRule[] }
    ).egress;
    expect(
      sessionsEgress.some(
        (r) =>
          (r.to ?? []).some((p) => p.podSelector?.matchLabels?.["app.kubernetes.io/name"] === "headscale") &&
          (r.ports ?? []).some((p) => p.port === 8080),
      ),
    ).toBe(true);
    // Without Headscale, sessions gets no such rule.
    const plain = (named(render("prod"), "NetworkPolicy", "cgs-sessions").spec as { egress: PolicyRule[] })
      .egress;
    expect(JSON.stringify(plain)).not.toContain("headscale");
  });

  it("when enabled without its host, database or secret, then rendering fails", () => {
    expect(() =>
      runHelm([
        "template",
        "cgs",
        CHART_DIR,
        "--kube-version",
        KUBE_VERSION,
        "-f",
        valuesFile("prod"),
        "--set",
        "headscale.enabled=true",
      ]),
    ).toThrow(/headscale.host is required/);
  });
});
