import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { fail, ipv4Cidr, unique } from "../config-checks";

export interface NetworkArgs {
  namePrefix: string;
  cidrBlock: string;
  availabilityZones: string[];
  /** One NAT gateway per AZ; otherwise one shared NAT gateway. */
  natGatewayPerAz: boolean;
  /** EKS cluster name, for the subnet tags the load balancer controller discovers subnets by. */
  clusterName: string;
  tags: Record<string, string>;
}

/** Splits a /16 (or larger) VPC CIDR: public /22s first, then private /20s. */
export function subnetCidrs(vpcCidr: string, zones: number): { public: string[]; private: string[] } {
  // The layout takes the first two octets: public /22s at .0-.60, private /20s at .64 up to .255 (12 zones).
  ipv4Cidr("cgs:vpcCidr", vpcCidr, 8, 16);
  if (!Number.isInteger(zones) || zones < 1 || zones > 12) {
    fail(`cgs:availabilityZones must list 1 to 12 zones for this subnet layout (got ${zones})`);
  }
  const [a, b] = vpcCidr.split(".");
  const pub = Array.from({ length: zones }, (_, i) => `${a}.${b}.${i * 4}.0/22`);
  const priv = Array.from({ length: zones }, (_, i) => `${a}.${b}.${64 + i * 16}.0/20`);
  return { public: pub, private: priv };
}

/**
 * VPC across the given availability zones: public subnets (load balancers, NAT, streaming
 * instances) and private subnets (nodes, database, cache) with NAT egress.
 */
export class Network extends pulumi.ComponentResource {
  readonly vpcId: pulumi.Output<string>;
  readonly vpcCidr: string;
  readonly publicSubnetIds: pulumi.Output<string>[];
  readonly privateSubnetIds: pulumi.Output<string>[];
  readonly publicSubnetCidrs: string[];
  readonly privateSubnetCidrs: string[];
  /** The private subnets' route tables (where the nodes and pods are), one per zone. */
  readonly privateRouteTableIds: pulumi.Output<string>[];

  constructor(name: string, args: NetworkArgs, opts?: pulumi.ComponentResourceOptions) {
    super("cgs:infra:Network", name, {}, opts);
    unique("cgs:availabilityZones", args.availabilityZones);
    const parent = { parent: this };
    const cidrs = subnetCidrs(args.cidrBlock, args.availabilityZones.length);
    const tag = (n: string, extra: Record<string, string> = {}) => ({
      ...args.tags,
      Name: `${args.namePrefix}-${n}`,
      ...extra,
    });

    const vpc = new aws.ec2.Vpc(
      name,
      { cidrBlock: args.cidrBlock, enableDnsHostnames: true, enableDnsSupport: true, tags: tag("vpc") },
      parent,
    );
    const igw = new aws.ec2.InternetGateway(`${name}-igw`, { vpcId: vpc.id, tags: tag("igw") }, parent);

    const publicRoutes = new aws.ec2.RouteTable(
      `${name}-public`,
      { vpcId: vpc.id, routes: [{ cidrBlock: "0.0.0.0/0", gatewayId: igw.id }], tags: tag("public") },
      parent,
    );

    const publicSubnets = args.availabilityZones.map((az, i) => {
      const subnet = new aws.ec2.Subnet(
        `${name}-public-${az}`,
        {
          vpcId: vpc.id,
          availabilityZone: az,
          cidrBlock: cidrs.public[i],
          mapPublicIpOnLaunch: true,
          tags: tag(`public-${az}`, {
            "kubernetes.io/role/elb": "1",
            [`kubernetes.io/cluster/${args.clusterName}`]: "shared",
          }),
        },
        parent,
      );
      new aws.ec2.RouteTableAssociation(
        `${name}-public-${az}`,
        { subnetId: subnet.id, routeTableId: publicRoutes.id },
        parent,
      );
      return subnet;
    });

    const natCount = args.natGatewayPerAz ? args.availabilityZones.length : 1;
    const natGateways = Array.from({ length: natCount }, (_, i) => {
      const az = args.availabilityZones[i] as string;
      const eip = new aws.ec2.Eip(`${name}-nat-${az}`, { domain: "vpc", tags: tag(`nat-${az}`) }, parent);
      return new aws.ec2.NatGateway(
        `${name}-nat-${az}`,
        { allocationId: eip.id, subnetId: (publicSubnets[i] as aws.ec2.Subnet).id, tags: tag(`nat-${az}`) },
        { parent: this, dependsOn: [igw] },
      );
    });

    const privateRouteTables: aws.ec2.RouteTable[] = [];
    const privateSubnets = args.availabilityZones.map((az, i) => {
      const nat = natGateways[args.natGatewayPerAz ? i : 0] as aws.ec2.NatGateway;
      // Routes as their own resources, not inline: the peering to each fleet region adds routes to these tables,
      // and a table with inline routes would remove them on its next update.
      const routes = new aws.ec2.RouteTable(
        `${name}-private-${az}`,
        { vpcId: vpc.id, tags: tag(`private-${az}`) },
        parent,
      );
      new aws.ec2.Route(
        `${name}-private-${az}-nat`,
        { routeTableId: routes.id, destinationCidrBlock: "0.0.0.0/0", natGatewayId: nat.id },
        parent,
      );
      privateRouteTables.push(routes);
      const subnet = new aws.ec2.Subnet(
        `${name}-private-${az}`,
        {
          vpcId: vpc.id,
          availabilityZone: az,
          cidrBlock: cidrs.private[i],
          mapPublicIpOnLaunch: false,
          tags: tag(`private-${az}`, {
            "kubernetes.io/role/internal-elb": "1",
            [`kubernetes.io/cluster/${args.clusterName}`]: "shared",
          }),
        },
        parent,
      );
      new aws.ec2.RouteTableAssociation(
        `${name}-private-${az}`,
        { subnetId: subnet.id, routeTableId: routes.id },
        parent,
      );
      return subnet;
    });

    this.vpcId = vpc.id;
    this.vpcCidr = args.cidrBlock;
    this.publicSubnetIds = publicSubnets.map((s) => s.id);
    this.privateSubnetIds = privateSubnets.map((s) => s.id);
    this.privateRouteTableIds = privateRouteTables.map((t) => t.id);
    this.publicSubnetCidrs = cidrs.public;
    this.privateSubnetCidrs = cidrs.private;
    this.registerOutputs({
      vpcId: this.vpcId,
      publicSubnetIds: this.publicSubnetIds,
      privateSubnetIds: this.privateSubnetIds,
    });
  }
}
