import * as k8s from "@pulumi/kubernetes";
import { mockResources, settled } from "../testing/component-harness";
import type { RecordedResource } from "../testing/stack-harness";
import { ADDON_CHARTS, ClusterAddons } from "./cluster-addons";

let resources: RecordedResource[];
let provider: k8s.Provider;
beforeAll(async () => {
  resources = await mockResources();
  provider = new k8s.Provider("k8s", { kubeconfig: "{}" });
});

let built = 0;
const addons = (region = "eu-west-1") =>
  new ClusterAddons(`addons-${++built}`, {
    clusterName: "cgs-test",
    region,
    accountId: "123456789012",
    vpcId: "vpc-1",
    clusterSecurityGroupId: "sg-cluster",
    oidcProviderArn: "arn:aws:iam::123456789012:oidc-provider/oidc.eks.eu-west-1.amazonaws.com/id/EXAMPLE",
    oidcIssuerUrl: "https://oidc.eks.eu-west-1.amazonaws.com/id/EXAMPLE",
    roleNamePrefix: "cgs-test",
    tags: {},
    provider,
  });

describe("ClusterAddons", () => {
  it("when built, then the load balancer controller, the CSI driver with its AWS provider and metrics-server are installed at pinned versions", async () => {
    addons();
    await settled();
    const charts = resources
      .filter((r) => r.type === "kubernetes:helm.sh/v3:Release" && r.name.startsWith(`addons-${built}-`))
      .map((r) => [r.inputs.chart, r.inputs.version]);
    expect(charts).toEqual(
      expect.arrayContaining(Object.values(ADDON_CHARTS).map((c) => [c.chart, c.version])),
    );
    expect(charts).toHaveLength(Object.keys(ADDON_CHARTS).length);
  });

  it("when the region is not an AWS region, then the add-ons are refused before their policies are scoped to it", () => {
    expect(() => addons("Ireland")).toThrow(
      /aws:region must be an AWS region such as eu-west-1 \(got "Ireland"\)/,
    );
  });
});
