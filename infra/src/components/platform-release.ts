import * as k8s from "@pulumi/kubernetes";
import * as fs from "node:fs";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { DNS_LABEL, fail, matching } from "../config-checks";

export interface PlatformReleaseArgs {
  chartPath: string;
  releaseName: string;
  namespace: string;
  values: Record<string, unknown>;
  provider: k8s.Provider;
  /** Cluster add-ons the chart needs (CSI driver, load balancer controller). */
  dependsOn: pulumi.Input<pulumi.Resource>[];
}

/**
 * The platform namespace (Pod Security "restricted" enforced) and the Helm release of
 * charts/cgs-platform; an upgrade that fails to become ready rolls back.
 */
export class PlatformRelease extends pulumi.ComponentResource {
  readonly ingressHostname: pulumi.Output<string>;
  readonly releaseStatus: pulumi.Output<string>;

  constructor(name: string, args: PlatformReleaseArgs, opts?: pulumi.ComponentResourceOptions) {
    super("cgs:infra:PlatformRelease", name, {}, opts);
    // Helm refuses release names over 53 characters (its objects' names add suffixes to 63).
    matching(
      "release name",
      args.releaseName,
      /^[a-z0-9]([-a-z0-9]{0,51}[a-z0-9])?$/,
      "a lowercase name of at most 53",
    );
    matching("namespace", args.namespace, DNS_LABEL, "a Kubernetes namespace name");
    if (!fs.existsSync(path.join(args.chartPath, "Chart.yaml"))) fail(`no Helm chart at ${args.chartPath}`);
    const k8sOpts = { parent: this, provider: args.provider };
    const ns = new k8s.core.v1.Namespace(
      name,
      {
        metadata: {
          name: args.namespace,
          labels: {
            "pod-security.kubernetes.io/enforce": "restricted",
            "pod-security.kubernetes.io/audit": "restricted",
          },
        },
      },
      k8sOpts,
    );
    const release = new k8s.helm.v3.Release(
      name,
      {
        name: args.releaseName,
        chart: args.chartPath,
        namespace: ns.metadata.name,
        values: pulumi.output(args.values),
        atomic: true,
        timeout: 900,
        cleanupOnFail: true,
      },
      { ...k8sOpts, dependsOn: args.dependsOn },
    );
    // The controller fills in the ALB's host name once it exists; point the domain's DNS at it.
    const ingress = k8s.networking.v1.Ingress.get(
      `${name}-gateway-ingress`,
      pulumi.interpolate`${release.status.namespace}/${args.releaseName}-gateway`,
      { ...k8sOpts, dependsOn: [release] },
    );
    this.ingressHostname = ingress.status.apply((s) => s?.loadBalancer?.ingress?.[0]?.hostname ?? "");
    this.releaseStatus = release.status.status;
    this.registerOutputs({ ingressHostname: this.ingressHostname });
  }
}
