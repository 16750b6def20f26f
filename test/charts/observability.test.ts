import { readFileSync } from "node:fs";
import path from "node:path";
import { parse } from "yaml";
import { CHART_DIR, render, type Manifest } from "./render-chart";

const DEPLOYABLES = ["gateway", "sessions", "billing", "accounts", "auth-proxy"];
const METRICS_PORT = 9464;

interface PolicyRule {
  from?: { namespaceSelector?: { matchLabels?: Record<string, string> }; podSelector?: unknown }[];
  ports?: { port: number }[];
}

const named = (ms: Manifest[], kind: string, name: string) => {
  const m = ms.find((x) => x.kind === kind && x.metadata.name === name);
  if (!m) throw new Error(`${kind} ${name} not rendered`);
  return m;
};

describe.each(["staging", "prod"])("chart cgs-platform observability with %s values", (env) => {
  let ms: Manifest[];
  beforeAll(() => {
    ms = render(env, ["--api-versions", "monitoring.coreos.com/v1"]);
  });

  it("when rendered, then every process is told its metrics port, exposes it by name and is annotated for scraping", () => {
    for (const name of DEPLOYABLES) {
      expect(named(ms, "ConfigMap", `cgs-${name}`).data?.METRICS_PORT).toBe(String(METRICS_PORT));
      const pod = (
        named(ms, "Deployment", `cgs-${name}`).spec as {
          template: {
            metadata: { annotations: Record<string, string> };
            spec: { containers: { ports: { name: string; containerPort: number }[] }[] };
          };
        }
      ).template;
      expect(pod.spec.containers[0]?.ports).toContainEqual(
        expect.objectContaining({ name: "metrics", containerPort: METRICS_PORT }),
      );
      expect(pod.metadata.annotations).toMatchObject({
        "prometheus.io/scrape": "true",
        "prometheus.io/port": String(METRICS_PORT),
      });
    }
  });

  it("when network policies apply, then only the monitoring namespace reaches the metrics port, and the ingress never routes to it", () => {
    for (const name of DEPLOYABLES) {
      const rules = (named(ms, "NetworkPolicy", `cgs-${name}`).spec as { ingress: PolicyRule[] }).ingress;
      const toMetrics = rules.filter((r) => (r.ports ?? []).some((p) => p.port === METRICS_PORT));
      expect(toMetrics).toHaveLength(1);
      expect(toMetrics[0]?.from).toEqual([
        { namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "monitoring" } } },
      ]);
    }
    for (const ingress of ms.filter((m) => m.kind === "Ingress")) {
      expect(JSON.stringify(ingress.spec)).not.toContain(String(METRICS_PORT));
      expect(JSON.stringify(ingress.spec)).not.toContain('"metrics"');
    }
  });

  it("when rendered, then a ServiceMonitor scrapes each service's metrics port keeping the processes' own service label", () => {
    for (const name of DEPLOYABLES) {
      const spec = named(ms, "ServiceMonitor", `cgs-${name}`).spec as {
        selector: { matchLabels: Record<string, string> };
        endpoints: { port: string; path: string; honorLabels: boolean }[];
      };
      expect(spec.selector.matchLabels["app.kubernetes.io/name"]).toBe(name);
      expect(spec.endpoints).toEqual([
        expect.objectContaining({ port: "metrics", path: "/metrics", honorLabels: true }),
      ]);
    }
  });

  it("when the cluster has no Prometheus Operator, then no ServiceMonitor or PrometheusRule is rendered to fail the install", () => {
    const plain = render(env);
    expect(plain.filter((m) => m.apiVersion.startsWith("monitoring.coreos.com/"))).toEqual([]);
    expect(plain.some((m) => m.kind === "Deployment")).toBe(true);
  });

  it("when rendered, then the PrometheusRule carries exactly the rules of the plain alerts file", () => {
    const plain = parse(readFileSync(path.join(CHART_DIR, "files", "alerts.yaml"), "utf8")) as unknown;
    expect(named(ms, "PrometheusRule", "cgs-alerts").spec).toEqual(plain);
  });
});
