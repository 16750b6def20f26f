import { mockResources, settled } from "../testing/component-harness";
import type { RecordedResource } from "../testing/stack-harness";
import { Network, subnetCidrs } from "./network";

let resources: RecordedResource[];
beforeAll(async () => {
  resources = await mockResources();
});

let built = 0;
const network = (cidrBlock: string, availabilityZones: string[], natGatewayPerAz = false) =>
  new Network(`network-${++built}`, {
    namePrefix: "cgs-test",
    cidrBlock,
    availabilityZones,
    natGatewayPerAz,
    clusterName: "cgs-test",
    tags: {},
  });
const created = (type: string, prefix: string) =>
  resources.filter((r) => r.type === type && (r.name.startsWith(`${prefix}-`) || r.name === prefix));

describe("Network", () => {
  it("when two zones share one NAT gateway, then each zone gets a public /22 and a private /20 that routes through it", async () => {
    network("10.20.0.0/16", ["eu-west-1a", "eu-west-1b"]);
    await settled();
    const name = `network-${built}`;
    const subnets = created("aws:ec2/subnet:Subnet", name).map((s) => [
      s.inputs.cidrBlock,
      s.inputs.mapPublicIpOnLaunch,
    ]);
    expect(subnets).toEqual([
      ["10.20.0.0/22", true],
      ["10.20.4.0/22", true],
      ["10.20.64.0/20", false],
      ["10.20.80.0/20", false],
    ]);
    expect(created("aws:ec2/natGateway:NatGateway", name)).toHaveLength(1);
    // The NAT route is a resource of its own, not inline: peering routes to fleet regions join these tables.
    const privateTables = created("aws:ec2/routeTable:RouteTable", `${name}-private`);
    expect(privateTables.map((t) => t.inputs.routes)).toEqual([undefined, undefined]);
    const natRoutes = created("aws:ec2/route:Route", name).map((r) => [
      r.inputs.routeTableId,
      r.inputs.destinationCidrBlock,
      r.inputs.natGatewayId,
    ]);
    expect(natRoutes).toEqual(
      privateTables.map((t) => [`${t.name}-id`, "0.0.0.0/0", `${name}-nat-eu-west-1a-id`]),
    );
  });

  it("when NAT is per zone, then every zone has its own NAT gateway", async () => {
    network("10.30.0.0/16", ["eu-west-1a", "eu-west-1b", "eu-west-1c"], true);
    await settled();
    expect(created("aws:ec2/natGateway:NatGateway", `network-${built}`)).toHaveLength(3);
  });

  it.each([
    [
      "a /24, too small for the layout",
      "10.20.0.0/24",
      /cgs:vpcCidr must be an IPv4 CIDR from \/8 to \/16 \(got "10.20.0.0\/24"\)/,
    ],
    ["no prefix length", "10.20.0.0", /cgs:vpcCidr must be an IPv4 CIDR/],
    ["an octet over 255", "300.20.0.0/16", /cgs:vpcCidr must be an IPv4 CIDR/],
    ["a word", "private", /cgs:vpcCidr must be an IPv4 CIDR/],
  ])("when the VPC CIDR is %s, then it is refused before any subnet is laid out", (_what, cidr, message) => {
    expect(() => subnetCidrs(cidr, 2)).toThrow(message);
    expect(() => network(cidr, ["eu-west-1a", "eu-west-1b"])).toThrow(message);
  });

  it("when a zone is listed twice, then the network is refused", () => {
    expect(() => network("10.20.0.0/16", ["eu-west-1a", "eu-west-1a"])).toThrow(
      /cgs:availabilityZones lists "eu-west-1a" twice/,
    );
  });

  it("when more zones are listed than private /20s fit, then the layout is refused", () => {
    expect(() => subnetCidrs("10.20.0.0/16", 13)).toThrow(/cgs:availabilityZones must list 1 to 12 zones/);
  });
});
