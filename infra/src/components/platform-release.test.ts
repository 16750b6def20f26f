import * as path from "node:path";
import * as k8s from "@pulumi/kubernetes";
import { mockResources, settled } from "../testing/component-harness";
import { REPO_ROOT, type RecordedResource } from "../testing/stack-harness";
import { PlatformRelease, type PlatformReleaseArgs } from "./platform-release";

let resources: RecordedResource[];
let provider: k8s.Provider;
beforeAll(async () => {
  resources = await mockResources();
  provider = new k8s.Provider("k8s", { kubeconfig: "{}" });
});

let built = 0;
const release = (change: Partial<PlatformReleaseArgs> = {}) =>
  new PlatformRelease(`platform-${++built}`, {
    chartPath: path.join(REPO_ROOT, "charts", "cgs-platform"),
    releaseName: "cgs",
    namespace: "cgs",
    values: {},
    provider,
    dependsOn: [],
    ...change,
  });

describe("PlatformRelease", () => {
  it("when built, then the namespace enforces Pod Security restricted and a failed upgrade rolls back", async () => {
    release();
    await settled();
    const ns = resources.find(
      (r) => r.type === "kubernetes:core/v1:Namespace" && r.name === `platform-${built}`,
    );
    expect(ns?.inputs.metadata).toMatchObject({
      name: "cgs",
      labels: { "pod-security.kubernetes.io/enforce": "restricted" },
    });
    const helm = resources.find(
      (r) => r.type === "kubernetes:helm.sh/v3:Release" && r.name === `platform-${built}`,
    );
    expect(helm?.inputs).toMatchObject({ name: "cgs", atomic: true, cleanupOnFail: true });
  });

  it.each([
    [
      "a release name over helm's 53 characters",
      { releaseName: "c".repeat(54) },
      /release name must be a lowercase name of at most 53/,
    ],
    ["an uppercase release name", { releaseName: "CGS" }, /release name must be a lowercase name/],
    [
      "a namespace with a dot",
      { namespace: "cgs.prod" },
      /namespace must be a Kubernetes namespace name \(got "cgs.prod"\)/,
    ],
    [
      "a chart path with no chart",
      { chartPath: path.join(REPO_ROOT, "charts") },
      /no Helm chart at .*charts/,
    ],
  ])("when given %s, then the release is refused", (_what, change, message) => {
    expect(() => release(change)).toThrow(message);
  });
});
