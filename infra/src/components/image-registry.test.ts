import { mockResources, settled } from "../testing/component-harness";
import type { RecordedResource } from "../testing/stack-harness";
import { ImageRegistry, type ImageRegistryArgs } from "./image-registry";

let resources: RecordedResource[];
beforeAll(async () => {
  resources = await mockResources();
});

let built = 0;
const registry = (change: Partial<ImageRegistryArgs> = {}) =>
  new ImageRegistry(`images-${++built}`, {
    prefix: "cgs-test",
    deployables: ["gateway", "sessions"],
    keepImages: 50,
    tags: {},
    ...change,
  });

describe("ImageRegistry", () => {
  it("when built, then each deployable gets an immutable, scanned repository that keeps its last images", async () => {
    const r = registry();
    await settled();
    const repos = resources.filter(
      (x) => x.type === "aws:ecr/repository:Repository" && x.name.startsWith(`images-${built}-`),
    );
    expect(repos.map((x) => [x.inputs.name, x.inputs.imageTagMutability])).toEqual([
      ["cgs-test/gateway", "IMMUTABLE"],
      ["cgs-test/sessions", "IMMUTABLE"],
    ]);
    const policy = resources.find(
      (x) => x.type === "aws:ecr/lifecyclePolicy:LifecyclePolicy" && x.name === `images-${built}-gateway`,
    );
    expect(JSON.parse(policy!.inputs.policy as string).rules[0].selection.countNumber).toBe(50);
    const host = await new Promise((resolve) => r.registry.apply(resolve));
    expect(host).toBe("123456789012.dkr.ecr.eu-west-1.amazonaws.com");
  });

  it.each([
    [
      "an uppercase prefix",
      { prefix: "CGS" },
      /image repository prefix must be a lowercase ECR name \(got "CGS"\)/,
    ],
    ["no deployable", { deployables: [] }, /deployables must be a non-empty list/],
    ["a deployable twice", { deployables: ["gateway", "gateway"] }, /deployables lists "gateway" twice/],
    ["an uppercase deployable", { deployables: ["Gateway"] }, /deployable must be a lowercase ECR name/],
    ["no image kept", { keepImages: 0 }, /keepImages must be an integer from 1 to 10000 \(got 0\)/],
  ])("when given %s, then the registry is refused", (_what, change, message) => {
    expect(() => registry(change)).toThrow(message);
  });
});
