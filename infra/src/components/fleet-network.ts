import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { fail, ipv4Cidr } from "../config-checks";

export interface FleetNetworkArgs {
  /** cgs-<environment>. */
  namePrefix: string;
  /** The fleet region's id (us-east-1); `provider` must manage that region. */
  region: string;
  /** The fleet VPC's range (`cgs:regions[].cidr`); its one public subnet spans it. */
  cidrBlock: string;
  availabilityZone: string;
  /** The cluster's VPC in the home region, where the sessions service runs. */
  cluster: {
    vpcId: pulumi.Input<string>;
    vpcCidr: string;
    /** The cluster's private route tables: the nodes' and pods' way to this region's hosts. */
    privateRouteTableIds: pulumi.Input<string>[];
  };
  /** The AWS provider of `region`. */
  provider: aws.Provider;
  tags: Record<string, string>;
}

/**
 * The network of a streaming fleet outside the home region: a VPC with one public subnet in the fleet's zone (hosts
 * reach the internet, the private network's coordination and the home region's SQS through its internet gateway),
 * and an inter-region VPC peering with the cluster's VPC, routed both ways, so the sessions service calls the hosts'
 * API and assignment ports at their VPC addresses as it does at home. Peering carries only what the fleet's
 * security group admits from the cluster's private subnets.
 */
export class FleetNetwork extends pulumi.ComponentResource {
  readonly vpcId: pulumi.Output<string>;
  readonly subnetId: pulumi.Output<string>;
  readonly peeringConnectionId: pulumi.Output<string>;

  constructor(name: string, args: FleetNetworkArgs, opts?: pulumi.ComponentResourceOptions) {
    super("cgs:infra:FleetNetwork", name, {}, opts);
    ipv4Cidr(`cgs:regions ${args.region}'s cidr`, args.cidrBlock, 16, 24);
    if (!new RegExp(`^${args.region}[a-z]$`).test(args.availabilityZone)) {
      fail(
        `cgs:regions ${args.region}'s availabilityZone ${args.availabilityZone} is not a zone of that region`,
      );
    }
    const remote = { parent: this, provider: args.provider };
    const home = { parent: this };
    const tag = (n: string) => ({ ...args.tags, Name: `${args.namePrefix}-${args.region}-${n}` });

    const vpc = new aws.ec2.Vpc(
      name,
      { cidrBlock: args.cidrBlock, enableDnsHostnames: true, enableDnsSupport: true, tags: tag("fleet") },
      remote,
    );
    const igw = new aws.ec2.InternetGateway(name, { vpcId: vpc.id, tags: tag("igw") }, remote);

    // Requested from the cluster's side (home region), accepted in the fleet's region: inter-region peering cannot
    // be auto-accepted by the requester.
    const peering = new aws.ec2.VpcPeeringConnection(
      name,
      { vpcId: args.cluster.vpcId, peerVpcId: vpc.id, peerRegion: args.region, tags: tag("peering") },
      home,
    );
    const accepted = new aws.ec2.VpcPeeringConnectionAccepter(
      name,
      { vpcPeeringConnectionId: peering.id, autoAccept: true, tags: tag("peering") },
      remote,
    );

    const routes = new aws.ec2.RouteTable(
      name,
      {
        vpcId: vpc.id,
        routes: [
          { cidrBlock: "0.0.0.0/0", gatewayId: igw.id },
          { cidrBlock: args.cluster.vpcCidr, vpcPeeringConnectionId: accepted.vpcPeeringConnectionId },
        ],
        tags: tag("public"),
      },
      remote,
    );
    const subnet = new aws.ec2.Subnet(
      name,
      {
        vpcId: vpc.id,
        availabilityZone: args.availabilityZone,
        cidrBlock: args.cidrBlock,
        mapPublicIpOnLaunch: true,
        tags: tag(`public-${args.availabilityZone}`),
      },
      remote,
    );
    new aws.ec2.RouteTableAssociation(name, { subnetId: subnet.id, routeTableId: routes.id }, remote);

    args.cluster.privateRouteTableIds.forEach((routeTableId, i) => {
      new aws.ec2.Route(
        `${name}-from-cluster-${i}`,
        {
          routeTableId,
          destinationCidrBlock: args.cidrBlock,
          vpcPeeringConnectionId: accepted.vpcPeeringConnectionId,
        },
        home,
      );
    });

    this.vpcId = vpc.id;
    this.subnetId = subnet.id;
    this.peeringConnectionId = accepted.vpcPeeringConnectionId;
    this.registerOutputs({ vpcId: this.vpcId, subnetId: this.subnetId, peeringConnectionId: peering.id });
  }
}
