import type { NodeGroupConfig } from "../config";
import { mockResources, settled, stagingValue } from "../testing/component-harness";
import type { RecordedResource } from "../testing/stack-harness";
import { Cluster } from "./cluster";

let resources: RecordedResource[];
beforeAll(async () => {
  resources = await mockResources();
});

let built = 0;
function cluster(
  change: (args: { kubernetesVersion: string; nodeGroups: NodeGroupConfig[] }) => void = () => {},
) {
  const args = {
    kubernetesVersion: stagingValue<string>("kubernetesVersion"),
    nodeGroups: stagingValue<NodeGroupConfig[]>("nodeGroups"),
  };
  change(args);
  return new Cluster(`cluster-${++built}`, {
    name: "cgs-test",
    region: "eu-west-1",
    vpcId: "vpc-1",
    privateSubnetIds: ["subnet-a"],
    publicSubnetIds: ["subnet-b"],
    tags: {},
    ...args,
  });
}
const group = (change: (g: NodeGroupConfig) => void) => (args: { nodeGroups: NodeGroupConfig[] }) =>
  change(args.nodeGroups[0]!);

describe("Cluster", () => {
  it("when built from staging's node group, then the group scales between its bounds in the private subnets", async () => {
    cluster();
    await settled();
    const groups = resources.filter(
      (r) => r.type === "aws:eks/nodeGroup:NodeGroup" && r.name.startsWith(`cluster-${built}-`),
    );
    expect(groups.map((g) => g.inputs)).toEqual([
      expect.objectContaining({
        subnetIds: ["subnet-a"],
        instanceTypes: ["t3.large"],
        scalingConfig: { minSize: 2, desiredSize: 2, maxSize: 4 },
        diskSize: 50,
      }),
    ]);
  });

  it.each([
    [
      "a version that is not an EKS minor",
      (a: { kubernetesVersion: string }) => (a.kubernetesVersion = "latest"),
      /cgs:kubernetesVersion must be an EKS minor version such as "1.35" \(got "latest"\)/,
    ],
    [
      "no node group",
      (a: { nodeGroups: NodeGroupConfig[] }) => (a.nodeGroups = []),
      /cgs:nodeGroups must be a non-empty list/,
    ],
    [
      "two groups of one name",
      (a: { nodeGroups: NodeGroupConfig[] }) => a.nodeGroups.push({ ...a.nodeGroups[0]! }),
      /cgs:nodeGroups\[\]\.name lists "general" twice/,
    ],
    [
      "a name AWS and Kubernetes labels refuse",
      group((g) => (g.name = "General_1")),
      /cgs:nodeGroups\["General_1"\]\.name must be a lowercase DNS label/,
    ],
    [
      "no instance type",
      group((g) => (g.instanceTypes = [])),
      /cgs:nodeGroups\["general"\]\.instanceTypes must be a non-empty list/,
    ],
    [
      "an instance type without its size",
      group((g) => (g.instanceTypes = ["large"])),
      /cgs:nodeGroups\["general"\]\.instanceTypes must be EC2 instance types/,
    ],
    [
      "a capacity type EKS does not offer",
      group((g) => ((g as { capacityType: string }).capacityType = "RESERVED")),
      /cgs:nodeGroups\["general"\]\.capacityType must be one of ON_DEMAND, SPOT \(got "RESERVED"\)/,
    ],
    [
      "a negative minimum",
      group((g) => (g.minSize = -1)),
      /cgs:nodeGroups\["general"\]\.minSize must be an integer of at least 0/,
    ],
    [
      "a desired size above the maximum",
      group((g) => (g.desiredSize = 5)),
      /cgs:nodeGroups\["general"\]\.desiredSize must be an integer from 2 to 4 \(got 5\)/,
    ],
    [
      "a disk too small for the node image",
      group((g) => (g.diskSizeGiB = 8)),
      /cgs:nodeGroups\["general"\]\.diskSizeGiB must be an integer from 20 to 16384 \(got 8\)/,
    ],
  ])("when the config has %s, then the cluster is refused", (_what, change, message) => {
    expect(() =>
      cluster(change as (a: { kubernetesVersion: string; nodeGroups: NodeGroupConfig[] }) => void),
    ).toThrow(message);
  });
});
