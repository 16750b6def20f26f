import * as vm from "node:vm";
import { sessionsConfigSchema } from "@cgs/sessions";
import { BEACON_HANDLER } from "../components/latency-beacon";
import { subnetCidrs } from "../components/network";
import { ACCOUNT_ID, ofType, readStackConfig, type RecordedResource, type StackRun } from "./stack-harness";
import { parseAllDocuments } from "yaml";
import { inlinePolicyOf, platformValues, renderChartWithProgramValues } from "./stack-invariants";

interface Rule {
  protocol: string;
  fromPort: number;
  toPort: number;
  cidrBlocks?: string[];
  ipv6CidrBlocks?: string[];
  securityGroups?: string[];
}

// Sunshine's API (47990) and a pool instance's assignment endpoint (47991): the sessions service's calls only.
const SESSIONS_ONLY_PORTS = [47990, 47991];
const opens = (r: Rule, port: number) => r.protocol === "-1" || (r.fromPort <= port && r.toPort >= port);

/**
 * Every fleet region of a stack as its file configures it: a streaming fleet in each, the home region's in the
 * cluster's VPC, the others' in a VPC of their own peered with it; one latency beacon per region; the sessions
 * service's REGIONS and the gateway's beacon origins built from what was created.
 */
export function describeFleetRegions(stack: string, run: () => StackRun): void {
  const config = readStackConfig(stack);
  const home = config["aws:region"] as string;
  const vpcCidr = config["cgs:vpcCidr"] as string;
  const zones = config["cgs:availabilityZones"] as string[];
  const clusterPrivateCidrs = subnetCidrs(vpcCidr, zones.length).private;
  const listed = config["cgs:regions"] as {
    id: string;
    name: string;
    cidr?: string;
    availabilityZone?: string;
  }[];
  const remote = listed.filter((r) => r.id !== home);
  const named = (type: string, name: string): RecordedResource => {
    const found = ofType(run(), type).filter((r) => r.name === name);
    expect(found).toHaveLength(1);
    return found[0]!;
  };

  describe(`stack ${stack}: one streaming fleet per region`, () => {
    it("when the stack file lists its regions, then it covers two or more, the home region among them", () => {
      expect(listed.length).toBeGreaterThanOrEqual(2);
      expect(listed.map((r) => r.id)).toContain(home);
    });

    it("when the stack is built, then every region has a launch template in that region, all with the one streaming host profile", () => {
      const templates = ofType(run(), "aws:ec2/launchTemplate:LaunchTemplate");
      expect(templates.map((t) => t.region).sort()).toEqual(listed.map((r) => r.id).sort());
      const profiles = new Set(templates.map((t) => (t.inputs.iamInstanceProfile as { arn: string }).arn));
      expect([...profiles]).toEqual([
        `arn:aws:iam::${ACCOUNT_ID}:instance-profile/cgs-${stack}-streaming-host`,
      ]);
      const hostRoles = ofType(run(), "aws:iam/role:Role").filter((r) =>
        String(r.inputs.name).endsWith("-streaming-host"),
      );
      expect(hostRoles).toHaveLength(1);
    });

    it.each(remote)(
      "when $id gets its fleet, then its VPC is peered with the cluster's and routed both ways",
      (r) => {
        const vpc = named("aws:ec2/vpc:Vpc", `fleet-network-${r.id}`);
        expect(vpc.region).toBe(r.id);
        expect(vpc.inputs.cidrBlock).toBe(r.cidr);
        const peering = named("aws:ec2/vpcPeeringConnection:VpcPeeringConnection", `fleet-network-${r.id}`);
        expect(peering.region).toBe(home);
        expect(peering.inputs).toMatchObject({
          vpcId: "network-id",
          peerVpcId: `fleet-network-${r.id}-id`,
          peerRegion: r.id,
        });
        const accepter = named(
          "aws:ec2/vpcPeeringConnectionAccepter:VpcPeeringConnectionAccepter",
          `fleet-network-${r.id}`,
        );
        expect(accepter.region).toBe(r.id);
        expect(accepter.inputs).toMatchObject({
          vpcPeeringConnectionId: peering.name + "-id",
          autoAccept: true,
        });

        // Fleet side: the cluster's VPC through the peering, the internet through the fleet's own gateway.
        const table = named("aws:ec2/routeTable:RouteTable", `fleet-network-${r.id}`);
        expect(table.region).toBe(r.id);
        expect(table.inputs.routes).toEqual([
          { cidrBlock: "0.0.0.0/0", gatewayId: `fleet-network-${r.id}-id` },
          { cidrBlock: vpcCidr, vpcPeeringConnectionId: `fleet-network-${r.id}-id` },
        ]);
        const subnet = named("aws:ec2/subnet:Subnet", `fleet-network-${r.id}`);
        expect(subnet.inputs).toMatchObject({
          vpcId: `fleet-network-${r.id}-id`,
          availabilityZone: r.availabilityZone ?? `${r.id}a`,
        });

        // Cluster side: every private route table (nodes and pods, where sessions runs) reaches the fleet's range.
        const privateTables = ofType(run(), "aws:ec2/routeTable:RouteTable")
          .filter((t) => t.name.startsWith("network-private-"))
          .map((t) => `${t.name}-id`);
        expect(privateTables).toHaveLength(zones.length);
        const toFleet = ofType(run(), "aws:ec2/route:Route").filter(
          (x) => x.inputs.destinationCidrBlock === r.cidr,
        );
        expect(toFleet.map((x) => x.inputs.routeTableId).sort()).toEqual([...privateTables].sort());
        for (const route of toFleet) {
          expect(route.region).toBe(home);
          expect(route.inputs.vpcPeeringConnectionId).toBe(`fleet-network-${r.id}-id`);
        }
      },
    );

    it.each(remote)(
      "when $id's hosts are reached from the cluster, then the API and assignment ports admit only the cluster's private subnets",
      (r) => {
        const sg = named("aws:ec2/securityGroup:SecurityGroup", `streaming-${r.id}-sg`);
        expect(sg.region).toBe(r.id);
        expect(sg.inputs.vpcId).toBe(`fleet-network-${r.id}-id`);
        for (const port of SESSIONS_ONLY_PORTS) {
          const rules = (sg.inputs.ingress as Rule[]).filter((x) => opens(x, port));
          expect(rules).toHaveLength(1);
          expect(rules[0]).toMatchObject({ protocol: "tcp", cidrBlocks: clusterPrivateCidrs });
          expect(rules[0]!.securityGroups ?? []).toEqual([]);
        }
        const template = named("aws:ec2/launchTemplate:LaunchTemplate", `streaming-${r.id}`);
        expect(template.inputs.vpcSecurityGroupIds).toEqual([`streaming-${r.id}-sg-id`]);
      },
    );

    it("when any security group of the stack is read, then none opens the API or assignment port to the internet", () => {
      const groups = ofType(run(), "aws:ec2/securityGroup:SecurityGroup");
      const fleetGroups = groups.filter((g) => /^streaming(-[a-z]+-[a-z]+-\d)?-sg$/.test(g.name));
      expect(fleetGroups.map((g) => g.region).sort()).toEqual(listed.map((r) => r.id).sort());
      for (const group of groups) {
        for (const rule of (group.inputs.ingress as Rule[] | undefined) ?? []) {
          if (!SESSIONS_ONLY_PORTS.some((port) => opens(rule, port))) continue;
          expect([...(rule.cidrBlocks ?? []), ...(rule.ipv6CidrBlocks ?? [])]).not.toContainEqual(
            expect.stringMatching(/^(0\.0\.0\.0|::)\/0$/),
          );
        }
      }
      const rules = ofType(run(), "aws:ec2/securityGroupRule:SecurityGroupRule");
      expect(rules).toEqual([]);
    });

    it("when hosts in any region report, then their role sends only to the home region's host-reports queue", () => {
      const policy = inlinePolicyOf(run(), `cgs-${stack}-streaming-host`);
      expect(policy.flatMap((p) => p.Statement)).toEqual([
        {
          Sid: "SendHostReports",
          Effect: "Allow",
          Action: ["sqs:SendMessage"],
          Resource: [`arn:aws:sqs:${home}:${ACCOUNT_ID}:${stack}-cgs-host-reports`],
        },
      ]);
    });

    it("when sessions manages instances, then it may do so in every fleet region, from that region's template, subnet and image only", () => {
      const statements = inlinePolicyOf(run(), `cgs-${stack}-sessions`).flatMap((p) => p.Statement);
      const resources = (sid: string) => [statements.find((s) => s.Sid === sid)?.Resource].flat();
      for (const r of listed) {
        const arn = (what: string) => `arn:aws:ec2:${r.id}:${ACCOUNT_ID}:${what}`;
        const fleet = r.id === home ? "streaming" : `streaming-${r.id}`;
        expect(resources("ControlOwnInstances")).toContain(arn("instance/*"));
        expect(resources("ManageOwnVolumes")).toContain(arn("volume/*"));
        expect(resources("ControlPoolInstances")).toContain(arn("instance/*"));
        expect(resources("LaunchFromTheStreamingTemplateOnly")).toEqual(
          expect.arrayContaining([
            arn(`launch-template/lt-${fleet}`),
            arn(`security-group/sg-${fleet}-sg`),
            expect.stringMatching(new RegExp(`^arn:aws:ec2:${r.id}::image/ami-`)),
          ]),
        );
      }
      const regionsGranted = new Set(
        statements
          .flatMap((s) => [s.Resource].flat())
          .filter((x) => x.startsWith("arn:aws:ec2:"))
          .map((x) => x.split(":")[3]),
      );
      expect([...regionsGranted].sort()).toEqual(listed.map((r) => r.id).sort());
    });

    it("when the beacons are built, then every region has a public function URL answering an empty 204 readable from any origin", async () => {
      const functions = ofType(run(), "aws:lambda/function:Function");
      expect(functions.map((f) => f.region).sort()).toEqual(listed.map((r) => r.id).sort());
      const urls = ofType(run(), "aws:lambda/functionUrl:FunctionUrl");
      expect(urls.map((u) => [u.region, u.inputs.authorizationType]).sort()).toEqual(
        listed.map((r) => [r.id, "NONE"]).sort(),
      );
      // The beacon's own code, run as Lambda would call it.
      const sandbox = { exports: {} as { handler?: () => Promise<unknown> } };
      vm.runInNewContext(BEACON_HANDLER, sandbox);
      expect(await sandbox.exports.handler!()).toEqual({
        statusCode: 204,
        headers: {
          "Access-Control-Allow-Origin": "*",
          "Timing-Allow-Origin": "*",
          "Cache-Control": "no-store",
        },
      });
      const beaconRole = ofType(run(), "aws:iam/role:Role").find((r) => r.name === "latency-beacon");
      expect(beaconRole).toBeDefined();
      expect(
        ofType(run(), "aws:iam/rolePolicy:RolePolicy").filter((p) => p.inputs.role === "latency-beacon-id"),
      ).toEqual([]);
    });

    it("when the sessions service reads its REGIONS, then its config accepts them: every region in order with its beacon, zone, template, subnet and security group", () => {
      const values = platformValues(run()) as unknown as {
        services: Record<
          string,
          { env: Record<string, string>; secrets: { keys: Record<string, string> }[] }
        >;
      };
      const sessions = values.services.sessions!;
      const commonEnv = (
        ofType(run(), "kubernetes:helm.sh/v3:Release").find((r) => r.name === "platform")!.inputs.values as {
          commonEnv: Record<string, string>;
        }
      ).commonEnv;
      // Secret values arrive from Secrets Manager at run time; these stand in for them in the right form.
      const secrets = Object.fromEntries(
        sessions.secrets
          .flatMap((s) => Object.keys(s.keys))
          .map((k) => [
            k,
            k === "DATABASE_URL"
              ? "postgres://sessions:x@db.example.com:5432/sessions"
              : k === "STREAMING_CREDENTIALS_KEY"
                ? Buffer.alloc(32, 7).toString("base64")
                : "placeholder-secret",
          ]),
      );
      const parsed = sessionsConfigSchema.safeParse({ ...commonEnv, ...sessions.env, ...secrets });
      expect(parsed.success ? [] : parsed.error.issues).toEqual([]);
      const regions = parsed.data!.REGIONS;
      expect(regions).toEqual(
        listed.map((r) => {
          const fleet = r.id === home ? "streaming" : `streaming-${r.id}`;
          const zone = r.availabilityZone ?? (r.id === home ? zones[0] : `${r.id}a`);
          return {
            id: r.id,
            name: r.name,
            beaconUrl: `https://latency-beacon-${r.id}.lambda-url.${r.id}.on.aws/`,
            availabilityZone: zone,
            ec2: {
              launchTemplate: `${fleet}-id`,
              subnetId: r.id === home ? `network-public-${zone}-id` : `fleet-network-${r.id}-id`,
              securityGroupIds: [`${fleet}-sg-id`],
            },
          };
        }),
      );
      expect(values.services.gateway!.env.PORTAL_BEACON_ORIGINS).toBe(
        listed.map((r) => `https://latency-beacon-${r.id}.lambda-url.${r.id}.on.aws`).join(","),
      );
    });

    it(
      "when the chart is rendered, then the sessions and gateway ConfigMaps carry REGIONS and the beacon origins intact",
      () => {
        const docs = parseAllDocuments(renderChartWithProgramValues(run())).map(
          (d) => d.toJSON() as { kind?: string; metadata?: { name: string }; data?: Record<string, string> },
        );
        const configMap = (name: string) =>
          docs.find((d) => d?.kind === "ConfigMap" && d.metadata?.name === name)?.data ?? {};
        const env = platformValues(run()).services;
        expect(JSON.parse(configMap("cgs-sessions").REGIONS!)).toEqual(
          JSON.parse(env.sessions!.env.REGIONS!),
        );
        expect(JSON.parse(configMap("cgs-sessions").REGIONS!)).toHaveLength(listed.length);
        expect(configMap("cgs-gateway").PORTAL_BEACON_ORIGINS).toBe(env.gateway!.env.PORTAL_BEACON_ORIGINS);
      },
      15 * 60_000,
    );
  });
}
