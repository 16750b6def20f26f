import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";

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
