import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { eventPublishers, platformEventRoutes, type EventType } from "@cgs/shared";
import { DEPLOYABLES } from "../service-catalog";
import { NAMESPACE, serviceAccountName } from "../platform-values";
import { REPO_ROOT, broadGrants, ofType, parsePolicy, readStackConfig, type StackRun } from "./stack-harness";

/**
 * Resource types every stack creates. Both stack tests compare against this one list, so staging
 * and prod provably build the same things and differ only in counts and values from config.
 */
export const EXPECTED_RESOURCE_TYPES = [
  "pulumi:providers:aws",
  "cgs:infra:LatencyBeacons",
  "cgs:infra:FleetNetwork",
  "aws:lambda/permission:Permission",
  "aws:lambda/functionUrl:FunctionUrl",
  "aws:lambda/function:Function",
  "aws:ec2/vpcPeeringConnectionAccepter:VpcPeeringConnectionAccepter",
  "aws:ec2/vpcPeeringConnection:VpcPeeringConnection",
  "aws:ec2/route:Route",
  "aws:acm/certificate:Certificate",
  "aws:acm/certificateValidation:CertificateValidation",
  "aws:cloudwatch/metricAlarm:MetricAlarm",
  "aws:ec2/eip:Eip",
  "aws:ec2/internetGateway:InternetGateway",
  "aws:ec2/launchTemplate:LaunchTemplate",
  "aws:ec2/natGateway:NatGateway",
  "aws:ec2/routeTable:RouteTable",
  "aws:ec2/routeTableAssociation:RouteTableAssociation",
  "aws:ec2/securityGroup:SecurityGroup",
  "aws:ec2/subnet:Subnet",
  "aws:ec2/vpc:Vpc",
  "aws:ecr/lifecyclePolicy:LifecyclePolicy",
  "aws:ecr/repository:Repository",
  "aws:eks/addon:Addon",
  "aws:eks/cluster:Cluster",
  "aws:eks/nodeGroup:NodeGroup",
  "aws:elasticache/replicationGroup:ReplicationGroup",
  "aws:elasticache/subnetGroup:SubnetGroup",
  "aws:iam/instanceProfile:InstanceProfile",
  "aws:iam/openIdConnectProvider:OpenIdConnectProvider",
  "aws:iam/role:Role",
  "aws:iam/rolePolicy:RolePolicy",
  "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
  "aws:imagebuilder/component:Component",
  "aws:imagebuilder/distributionConfiguration:DistributionConfiguration",
  "aws:imagebuilder/image:Image",
  "aws:imagebuilder/imagePipeline:ImagePipeline",
  "aws:imagebuilder/imageRecipe:ImageRecipe",
  "aws:imagebuilder/infrastructureConfiguration:InfrastructureConfiguration",
  "aws:kms/key:Key",
  "aws:rds/instance:Instance",
  "aws:rds/parameterGroup:ParameterGroup",
  "aws:rds/subnetGroup:SubnetGroup",
  "aws:route53/record:Record",
  "aws:s3/bucket:Bucket",
  "aws:s3/bucketObjectv2:BucketObjectv2",
  "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",
  "aws:secretsmanager/secret:Secret",
  "aws:secretsmanager/secretVersion:SecretVersion",
  "aws:sns/topic:Topic",
  "aws:sqs/queue:Queue",
  "aws:sqs/redriveAllowPolicy:RedriveAllowPolicy",
  "cgs:infra:AppSecrets",
  "cgs:infra:Cluster",
  "cgs:infra:ClusterAddons",
  "cgs:infra:Database",
  "cgs:infra:ImageRegistry",
  "cgs:infra:Network",
  "cgs:infra:PlatformAlarms",
  "cgs:infra:PlatformRelease",
  "cgs:infra:PublicEndpoint",
  "cgs:infra:RateLimitCache",
  "cgs:infra:ServiceAccountRole",
  "cgs:infra:ServiceQueue",
  "cgs:infra:StreamingFleet",
  "cgs:infra:StreamingImage",
  "kubernetes:core/v1:Namespace",
  "kubernetes:helm.sh/v3:Release",
  "kubernetes:networking.k8s.io/v1:Ingress",
  "pulumi:providers:kubernetes",
  "random:index/randomBytes:RandomBytes",
  "random:index/randomPassword:RandomPassword",
];

export interface ServiceValues {
  replicas: number;
  autoscaling: { enabled: boolean; minReplicas: number; maxReplicas: number };
  pdb: { enabled: boolean };
  serviceAccount: { roleArn: string };
  env: Record<string, string>;
  secrets: { secret: string; keys: Record<string, string> }[];
  egress: { services: string[]; postgres: boolean; redis: boolean; internetPorts: number[] };
}

export function platformValues(run: StackRun): {
  services: Record<string, ServiceValues>;
  otelCollector: ServiceValues;
} {
  const release = ofType(run, "kubernetes:helm.sh/v3:Release").find((r) => r.name === "platform");
  if (!release) throw new Error("the platform chart is not deployed");
  return release.inputs.values as { services: Record<string, ServiceValues>; otelCollector: ServiceValues };
}

interface TrustPolicy {
  Statement: { Condition?: { StringEquals?: Record<string, string> } }[];
}

/** Service-account subject (system:serviceaccount:ns:name) -> the roles that trust it. */
export function rolesBySubject(run: StackRun): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const role of ofType(run, "aws:iam/role:Role")) {
    const trust = JSON.parse(role.inputs.assumeRolePolicy as string) as TrustPolicy;
    for (const st of trust.Statement) {
      for (const [key, value] of Object.entries(st.Condition?.StringEquals ?? {})) {
        if (key.endsWith(":sub")) out.set(value, [...(out.get(value) ?? []), role.inputs.name as string]);
      }
    }
  }
  return out;
}

export function inlinePolicyOf(run: StackRun, roleName: string) {
  const role = ofType(run, "aws:iam/role:Role").find((r) => r.inputs.name === roleName);
  const policies = ofType(run, "aws:iam/rolePolicy:RolePolicy").filter(
    (p) => p.inputs.role === `${role?.name}-id`,
  );
  return policies.map((p) => parsePolicy(p.inputs.policy));
}

/** Assertions that hold for every stack; `run` is the single program run of the test file. */
export function describeStackInvariants(stack: string, run: () => StackRun): void {
  describe(`stack ${stack}: invariants shared by every stack`, () => {
    it("when the program runs, then it creates exactly the resource types every stack creates", () => {
      const types = [...new Set(run().resources.map((r) => r.type))].sort();
      expect(types).toEqual([...EXPECTED_RESOURCE_TYPES].sort());
    });

    it("when queues are created, then every inbound queue redrives to its own DLQ after bounded receives", () => {
      const queues = ofType(run(), "aws:sqs/queue:Queue");
      const dlqs = queues.filter((q) => String(q.inputs.name).endsWith("-dlq"));
      const inbound = queues.filter((q) => !String(q.inputs.name).endsWith("-dlq"));
      expect(inbound.map((q) => q.inputs.name).sort()).toEqual(
        [...DEPLOYABLES.filter((d) => d.consumesQueue).map((d) => d.name), "host-reports"]
          .map((n) => `${stack}-cgs-${n}`)
          .sort(),
      );
      for (const q of inbound) {
        expect(q.inputs.redrivePolicy).toEqual(expect.any(String));
        const redrive = JSON.parse(q.inputs.redrivePolicy as string) as {
          deadLetterTargetArn: string;
          maxReceiveCount: number;
        };
        expect(redrive.deadLetterTargetArn).toMatch(new RegExp(`:${String(q.inputs.name)}-dlq$`));
        expect(redrive.maxReceiveCount).toBeGreaterThanOrEqual(1);
        expect(redrive.maxReceiveCount).toBeLessThanOrEqual(10);
      }
      expect(dlqs).toHaveLength(inbound.length);
      for (const q of queues) expect(q.inputs.sqsManagedSseEnabled).toBe(true);
    });

    it("when IAM policies are written, then none grants * where AWS supports a narrower resource", () => {
      const policies = [
        ...ofType(run(), "aws:iam/rolePolicy:RolePolicy"),
        ...ofType(run(), "aws:iam/policy:Policy"),
      ].map((p) => ({ name: p.name, doc: parsePolicy(p.inputs.policy) }));
      expect(policies.length).toBeGreaterThanOrEqual(DEPLOYABLES.length);
      const problems = policies.flatMap((p) =>
        p.doc.Statement.flatMap((s) => broadGrants(s).map((m) => `${p.name}: ${m}`)),
      );
      expect(problems).toEqual([]);
    });

    it("when service accounts get roles, then each deployable has its own role trusted by only its account", () => {
      const bySubject = rolesBySubject(run());
      const roleNames = DEPLOYABLES.map((d) => {
        const roles = bySubject.get(`system:serviceaccount:${NAMESPACE}:${serviceAccountName(d.name)}`) ?? [];
        expect(roles).toHaveLength(1);
        return roles[0];
      });
      expect(new Set(roleNames).size).toBe(DEPLOYABLES.length);
      const values = platformValues(run());
      for (const d of DEPLOYABLES) {
        expect(values.services[d.name]?.serviceAccount.roleArn).toBe(
          `arn:aws:iam::123456789012:role/cgs-${stack}-${d.name}`,
        );
      }
    });

    it("when roles touch queues, then each consumes only its own queue and sends only where it publishes", () => {
      for (const d of DEPLOYABLES) {
        const statements = inlinePolicyOf(run(), `cgs-${stack}-${d.name}`).flatMap((p) => p.Statement);
        const sqsResources = (verb: string) =>
          statements.filter((s) => s.Action.includes(verb)).flatMap((s) => [s.Resource].flat());
        expect(sqsResources("sqs:ReceiveMessage")).toEqual([
          ...(d.consumesQueue ? [expect.stringMatching(new RegExp(`:sqs:.*:${stack}-cgs-${d.name}$`))] : []),
          ...(d.managesStreamingInstances
            ? [expect.stringMatching(new RegExp(`:sqs:.*:${stack}-cgs-host-reports$`))]
            : []),
        ]);
        expect(sqsResources("sqs:SendMessage").sort()).toEqual(
          [...d.publishesTo].sort().map((t) => expect.stringMatching(new RegExp(`:${stack}-cgs-${t}$`))),
        );
      }
    });

    it("when an event type is routed to a queue, then the role of the service that publishes it may send there", () => {
      for (const [type, destinations] of Object.entries(platformEventRoutes)) {
        const publisher = eventPublishers[type as EventType];
        const statements = inlinePolicyOf(run(), `cgs-${stack}-${publisher}`).flatMap((p) => p.Statement);
        const sendable = statements
          .filter((s) => s.Action.includes("sqs:SendMessage"))
          .flatMap((s) => [s.Resource].flat());
        for (const queue of destinations ?? []) {
          expect(sendable).toContainEqual(expect.stringMatching(new RegExp(`:${stack}-${queue}$`)));
        }
      }
    });

    it("when sessions may launch instances, then EC2 writes are scoped to its template and tag", () => {
      const statements = inlinePolicyOf(run(), `cgs-${stack}-sessions`).flatMap((p) => p.Statement);
      const ec2Writes = statements.filter((s) =>
        s.Action.some((a) => a.startsWith("ec2:") && !a.startsWith("ec2:Describe")),
      );
      expect(ec2Writes.length).toBeGreaterThan(0);
      for (const s of ec2Writes) {
        const resources = [s.Resource].flat();
        expect(resources).not.toContain("*");
        const wildcardArns = resources.filter((r) => r.endsWith("/*") && !r.includes("network-interface/"));
        if (wildcardArns.length > 0) expect(s.Condition).toBeDefined();
      }
      const launch = statements.find((s) => s.Sid === "LaunchFromTheStreamingTemplateOnly");
      expect([launch?.Resource].flat()).toContainEqual(expect.stringContaining(":launch-template/"));
      for (const other of DEPLOYABLES.filter((d) => !d.managesStreamingInstances)) {
        const actions = inlinePolicyOf(run(), `cgs-${stack}-${other.name}`).flatMap((p) =>
          p.Statement.flatMap((s) => s.Action),
        );
        expect(actions.filter((a) => a.startsWith("ec2:"))).toEqual([]);
      }
    });

    it("when secrets are delivered, then only billing reads Stripe and only auth-proxy reads the IdP secret", () => {
      const readers = (fragment: string) =>
        DEPLOYABLES.filter((d) =>
          inlinePolicyOf(run(), `cgs-${stack}-${d.name}`)
            .flatMap((p) => p.Statement)
            .some(
              (s) =>
                s.Action.includes("secretsmanager:GetSecretValue") &&
                [s.Resource].flat().some((r) => r.includes(fragment)),
            ),
        ).map((d) => d.name);
      expect(readers(`/stripe-`)).toEqual(["billing"]);
      expect(readers(`/identity-provider-`)).toEqual(["auth-proxy"]);
      const values = platformValues(run());
      expect(values.services.billing?.secrets.flatMap((e) => Object.keys(e.keys)).sort()).toEqual([
        "DATABASE_URL",
        "STRIPE_SECRET_KEY",
        "STRIPE_WEBHOOK_SECRET",
      ]);
      expect(values.services.gateway?.secrets.flatMap((e) => Object.keys(e.keys))).toEqual(["REDIS_URL"]);
    });

    it("when the database is created, then it is encrypted, private, TLS-only and one database per service", () => {
      const [db] = ofType(run(), "aws:rds/instance:Instance");
      expect(db?.inputs).toMatchObject({
        engine: "postgres",
        storageEncrypted: true,
        publiclyAccessible: false,
      });
      const params = ofType(run(), "aws:rds/parameterGroup:ParameterGroup")[0]?.inputs.parameters;
      expect(params).toContainEqual(expect.objectContaining({ name: "rds.force_ssl", value: "1" }));
      const dbSecrets = ofType(run(), "aws:secretsmanager/secret:Secret")
        .map((s) => String(s.inputs.name))
        .filter((n) => n.endsWith("/database"));
      // A self-hosted private network (Headscale) keeps its state in a database of its own.
      const selfHosted =
        (readStackConfig(stack)["cgs:privateNetwork"] as { kind: string }).kind === "headscale";
      expect(dbSecrets.sort()).toEqual(
        [...DEPLOYABLES.filter((d) => d.database).map((d) => d.name), ...(selfHosted ? ["headscale"] : [])]
          .map((name) => `cgs-${stack}/${name}/database`)
          .sort(),
      );
    });

    it("when the platform chart is deployed, then every service gets its queues, cloud and OIDC settings", () => {
      const values = platformValues(run());
      expect(values.services.sessions?.env).toMatchObject({
        QUEUE_NAME_PREFIX: `${stack}-`,
        QUEUE_NAME: "cgs-sessions",
        SESSIONS_QUEUE_URL: expect.stringContaining(`/${stack}-cgs-sessions`),
        BILLING_QUEUE_URL: expect.stringContaining(`/${stack}-cgs-billing`),
        CLOUD_PROVIDER: "ec2",
        CLOUD_TAG_PREFIX: `cgs-${stack}`,
        EC2_LAUNCH_TEMPLATE: expect.any(String),
        EC2_SUBNET_ID: expect.any(String),
      });
      expect(values.services.billing?.env).toMatchObject({
        PAYMENT_PROVIDER: "stripe",
        QUEUE_NAME: "cgs-billing",
      });
      expect(values.services.gateway?.env.TRUST_PROXY).toMatch(
        /^10\.\d+\.\d+\.0\/22(,10\.\d+\.\d+\.0\/22)+$/,
      );
      for (const name of ["gateway", "auth-proxy"]) {
        expect(Object.keys(values.services[name]?.env ?? {}).filter((k) => k.startsWith("QUEUE_"))).toEqual(
          [],
        );
      }
      const release = ofType(run(), "kubernetes:helm.sh/v3:Release").find((r) => r.name === "platform");
      expect(release?.inputs).toMatchObject({ atomic: true, namespace: NAMESPACE });
      expect((release?.inputs.values as { commonEnv: Record<string, string> }).commonEnv).toMatchObject({
        OIDC_ISSUER: expect.stringMatching(/^https:\/\//),
        OIDC_AUDIENCE: "cgs-api",
      });
    });

    it(
      "when the chart is rendered with the values the program computed, then every service gets its wiring",
      () => {
        const rendered = renderChartWithProgramValues(run());
        for (const d of DEPLOYABLES) {
          expect(rendered).toContain(
            `eks.amazonaws.com/role-arn: "arn:aws:iam::123456789012:role/cgs-${stack}-${d.name}"`,
          );
          expect(rendered).toContain(
            `image: "123456789012.dkr.ecr.eu-west-1.amazonaws.com/cgs-${stack}/${d.name}:`,
          );
        }
        expect(rendered).toContain(
          `SESSIONS_QUEUE_URL: "https://sqs.eu-west-1.amazonaws.com/123456789012/${stack}-cgs-sessions"`,
        );
        expect(rendered).toContain('HOST: "0.0.0.0"');
        expect(rendered).toContain(
          `objectName: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:cgs-${stack}/stripe-AbCdEf"`,
        );
        expect(rendered).toContain("kind: Job");
      },
      15 * 60_000,
    );

    it("when the cluster is created, then the VPC spans two or more zones and nodes run in private subnets", () => {
      const subnets = ofType(run(), "aws:ec2/subnet:Subnet");
      const privateSubnets = subnets.filter((s) => s.inputs.mapPublicIpOnLaunch === false);
      expect(new Set(privateSubnets.map((s) => s.inputs.availabilityZone)).size).toBeGreaterThanOrEqual(2);
      const privateIds = privateSubnets.map((s) => `${s.name}-id`).sort();
      for (const group of ofType(run(), "aws:eks/nodeGroup:NodeGroup")) {
        expect([...(group.inputs.subnetIds as string[])].sort()).toEqual(privateIds);
      }
      expect(ofType(run(), "aws:iam/openIdConnectProvider:OpenIdConnectProvider")).toHaveLength(1);
      const cni = ofType(run(), "aws:eks/addon:Addon").find((a) => a.inputs.addonName === "vpc-cni");
      expect(JSON.parse(cni?.inputs.configurationValues as string)).toEqual({ enableNetworkPolicy: "true" });
    });
  });
}

/** Renders charts/cgs-platform with the values the program computed (helm from test/peers/helm.sh). */
export function renderChartWithProgramValues(run: StackRun): string {
  const release = ofType(run, "kubernetes:helm.sh/v3:Release").find((r) => r.name === "platform");
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "cgs-values-"));
  const valuesPath = path.join(dir, "values.json");
  fs.writeFileSync(valuesPath, JSON.stringify(release?.inputs.values));
  const helm = execFileSync("bash", [path.join(REPO_ROOT, "test", "peers", "helm.sh")], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
    timeout: 15 * 60_000,
  }).trim();
  try {
    return execFileSync(
      helm,
      [
        "template",
        "cgs",
        release?.inputs.chart as string,
        "-n",
        "cgs",
        "--kube-version",
        "1.35.0",
        "-f",
        valuesPath,
      ],
      { encoding: "utf8" },
    );
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
