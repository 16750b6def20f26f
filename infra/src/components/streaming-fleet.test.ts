import type { StreamingConfig } from "../config";
import { mockResources, settled, stagingValue } from "../testing/component-harness";
import type { RecordedResource } from "../testing/stack-harness";
import { StreamingFleet, type StreamingFleetArgs } from "./streaming-fleet";

let resources: RecordedResource[];
beforeAll(async () => {
  resources = await mockResources();
});

let built = 0;
function fleet(
  change: (c: StreamingConfig) => void = () => {},
  apiClients: StreamingFleetArgs["apiClients"] = { securityGroupIds: ["sg-cluster"] },
) {
  const config = stagingValue<StreamingConfig>("streaming");
  change(config);
  return new StreamingFleet(`streaming-${++built}`, {
    ...config,
    name: "cgs-test",
    vpcId: "vpc-1",
    apiClients,
    tagPrefix: "cgs-test",
    imageId: config.amiId ?? "ami-0123456789abcdef0",
    hostReportsQueueArn: "arn:aws:sqs:eu-west-1:123456789012:staging-cgs-host-reports",
    tags: {},
  });
}

describe("StreamingFleet", () => {
  it("when built from staging's settings, then instances boot the AMI with an encrypted root volume and IMDSv2 only", async () => {
    fleet();
    await settled();
    const template = resources.find(
      (r) => r.type === "aws:ec2/launchTemplate:LaunchTemplate" && r.name === `streaming-${built}`,
    );
    expect(template?.inputs).toMatchObject({
      imageId: "ami-0123456789abcdef0",
      instanceType: "g4dn.xlarge",
      metadataOptions: { httpTokens: "required" },
      blockDeviceMappings: [{ deviceName: "/dev/sda1", ebs: { volumeSize: 100, encrypted: "true" } }],
    });
  });

  it.each([
    [
      "the whole internet as the private network",
      (c: StreamingConfig) => (c.privateNetworkCidrs = ["0.0.0.0/0"]),
      /streaming.privateNetworkCidrs must name the private network's range, never 0.0.0.0\/0/,
    ],
    [
      "no private network",
      (c: StreamingConfig) => (c.privateNetworkCidrs = []),
      /streaming.privateNetworkCidrs must name the private network's range, never nothing/,
    ],
    [
      "a private network that is not a CIDR",
      (c: StreamingConfig) => (c.privateNetworkCidrs = ["tailnet"]),
      /cgs:streaming.privateNetworkCidrs must be an IPv4 CIDR from \/8 to \/32 \(got "tailnet"\)/,
    ],
    [
      "no streaming TCP port",
      (c: StreamingConfig) => (c.tcpPorts = []),
      /cgs:streaming.tcpPorts must be a non-empty list/,
    ],
    [
      "a port beyond 65535",
      (c: StreamingConfig) => (c.tcpPorts = [70_000]),
      /cgs:streaming.tcpPorts must be an integer from 1 to 65535 \(got 70000\)/,
    ],
    [
      "a port listed twice",
      (c: StreamingConfig) => (c.tcpPorts = [47984, 47984]),
      /cgs:streaming.tcpPorts lists 47984 twice/,
    ],
    [
      "a UDP range that ends before it starts",
      (c: StreamingConfig) => (c.udpPortRange = { from: 48010, to: 47998 }),
      /cgs:streaming.udpPortRange.to must be an integer from 48010 to 65535 \(got 47998\)/,
    ],
    [
      "the host API port among the streaming ports",
      (c: StreamingConfig) => (c.tcpPorts = [47984, 47990]),
      /cgs:streaming.apiPort 47990 is also in cgs:streaming.tcpPorts, which the private network reaches/,
    ],
    [
      "the assignment port among the streaming ports",
      (c: StreamingConfig) => (c.tcpPorts = [47984, 47991]),
      /cgs:streaming.assignPort 47991 is also in cgs:streaming.tcpPorts, which the private network reaches/,
    ],
    [
      "the assignment port on the host API's port",
      (c: StreamingConfig) => (c.assignPort = 47990),
      /cgs:streaming.assignPort 47990 is cgs:streaming.apiPort too/,
    ],
    [
      "no assignment port",
      (c: StreamingConfig) => delete (c as Partial<StreamingConfig>).assignPort,
      /cgs:streaming.assignPort must be an integer from 1 to 65535 \(got undefined\)/,
    ],
    [
      "an AMI name instead of its id",
      (c: StreamingConfig) => (c.amiId = "ubuntu-22.04"),
      /cgs:streaming.amiId must be an AMI id/,
    ],
    [
      "an instance type without its size",
      (c: StreamingConfig) => (c.instanceType = "g4dn"),
      /cgs:streaming.instanceType must be an EC2 instance type/,
    ],
    [
      "an empty root volume",
      (c: StreamingConfig) => (c.volumeSizeGiB = 0),
      /cgs:streaming.volumeSizeGiB must be an integer from 1 to 16384/,
    ],
    [
      "a device name without /dev/",
      (c: StreamingConfig) => (c.rootDeviceName = "sda1"),
      /cgs:streaming.rootDeviceName must be a device such as \/dev\/sda1/,
    ],
  ])("when the config has %s, then the fleet is refused", (_what, change, message) => {
    expect(() => fleet(change)).toThrow(message);
  });

  it("when a fleet in another region admits the sessions service by CIDR, then the API and assignment ports open to those CIDRs and nothing else does", async () => {
    fleet(undefined, { cidrBlocks: ["10.20.64.0/20", "10.20.80.0/20"] });
    await settled();
    const sg = resources.find((r) => r.name === `streaming-${built}-sg`);
    const rules = sg?.inputs.ingress as {
      fromPort: number;
      cidrBlocks?: string[];
      securityGroups?: string[];
    }[];
    const onPort = (port: number) => rules.filter((r) => r.fromPort === port);
    for (const port of [47990, 47991]) {
      expect(onPort(port)).toEqual([
        expect.objectContaining({ cidrBlocks: ["10.20.64.0/20", "10.20.80.0/20"] }),
      ]);
      expect(onPort(port)[0]?.securityGroups).toBeUndefined();
    }
  });

  it.each([["0.0.0.0/0"], ["::/0"], ["10.20.64.0"]])(
    "when the sessions service's CIDRs are %s, then the fleet is refused",
    (cidr) => {
      expect(() => fleet(undefined, { cidrBlocks: [cidr] })).toThrow(
        /the streaming host API can never be opened to|the sessions service's CIDRs must be an IPv4 CIDR/,
      );
    },
  );
});
