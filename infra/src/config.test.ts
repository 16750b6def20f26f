import { loadPlatformConfig, type CapacityPoolsConfig, type WorkloadConfig } from "./config";
import { readStackConfig, TEST_SECRETS } from "./testing/stack-harness";
import { stagingValue, useStagingConfigWith } from "./testing/component-harness";

/** Staging's value of `cgs:<key>` changed by `change`, as a config override. */
function changed<T>(key: string, change: (value: T) => void): Record<string, unknown> {
  const value = stagingValue<T>(key);
  change(value);
  return { [`cgs:${key}`]: value };
}
const workloads = (change: (w: WorkloadConfig) => void) => changed<WorkloadConfig>("workloads", change);
const pools = (change: (p: CapacityPoolsConfig) => void) =>
  changed<CapacityPoolsConfig>("capacityPools", change);

describe("stack configuration: what loads", () => {
  it.each(["staging", "prod"])(
    "when the committed %s file is loaded, then it passes every check",
    (stack) => {
      useStagingConfigWith(Object.fromEntries(Object.entries(readStackConfig(stack))));
      const cfg = loadPlatformConfig();
      expect(cfg.environment).toBe(stack);
      expect(cfg.availabilityZones.length).toBeGreaterThanOrEqual(2);
    },
  );
});

describe("stack configuration: refusals that name the key", () => {
  it.each([
    [
      "an environment that cannot name AWS resources",
      { "cgs:environment": "Staging Env" },
      /cgs:environment must be a lowercase name/,
    ],
    [
      "an environment too long for ElastiCache and IAM names",
      { "cgs:environment": "a".repeat(21) },
      /cgs:environment/,
    ],
    [
      "a region that is not one",
      { "aws:region": "europe" },
      /aws:region must be an AWS region such as eu-west-1 \(got "europe"\)/,
    ],
    [
      "zones of another region",
      { "cgs:availabilityZones": ["us-east-1a", "us-east-1b"] },
      /cgs:availabilityZones: "us-east-1a" is not a zone of aws:region eu-west-1/,
    ],
    [
      "the same zone twice",
      { "cgs:availabilityZones": ["eu-west-1a", "eu-west-1a"] },
      /cgs:availabilityZones lists "eu-west-1a" twice/,
    ],
    [
      "a single zone",
      { "cgs:availabilityZones": ["eu-west-1a"] },
      /cgs:availabilityZones needs at least two zones/,
    ],
    ["no node group", { "cgs:nodeGroups": [] }, /cgs:nodeGroups needs at least one node group/],
    [
      "a node group whose desired size is below its minimum",
      changed<{ minSize: number }[]>("nodeGroups", (g) => (g[0]!.minSize = 3)),
      /node group general: expected minSize <= desiredSize <= maxSize/,
    ],
    [
      "a deployable without replicas",
      workloads((w) => (w.replicas.gateway = 0)),
      /cgs:workloads.replicas.gateway must be a positive integer/,
    ],
    [
      "a deployable left out of replicas",
      workloads((w) => delete (w.replicas as Partial<typeof w.replicas>).billing),
      /cgs:workloads.replicas.billing/,
    ],
    [
      "a ceiling below a replica floor",
      workloads((w) => ((w.replicas.sessions = 4), (w.maxReplicas = 3))),
      /cgs:workloads.maxReplicas must be an integer from 4 to 100 \(got 3\)/,
    ],
    [
      "a CPU target over 100 %",
      workloads((w) => (w.targetCpuPercent = 150)),
      /cgs:workloads.targetCpuPercent must be an integer from 1 to 100 \(got 150\)/,
    ],
    [
      "a CPU request above its limit",
      workloads((w) => (w.requests.cpu = "2")),
      /cgs:workloads.requests.cpu 2 is above cgs:workloads.limits.cpu 500m/,
    ],
    [
      "a memory request above its limit",
      workloads((w) => (w.requests.memory = "1Gi")),
      /cgs:workloads.requests.memory 1Gi is above cgs:workloads.limits.memory 384Mi/,
    ],
    [
      "a CPU quantity that is not one",
      workloads((w) => (w.limits.cpu = "lots")),
      /cgs:workloads.limits.cpu must be a CPU quantity such as 250m or 1 \(got "lots"\)/,
    ],
    [
      "a memory quantity that is not one",
      workloads((w) => (w.limits.memory = "384MB")),
      /cgs:workloads.limits.memory must be a memory quantity/,
    ],
    [
      "no receive before the dead-letter queue",
      changed<{ maxReceiveCount: number }>("queues", (q) => (q.maxReceiveCount = 0)),
      /cgs:queues.maxReceiveCount must be at least 1/,
    ],
    [
      "a cache without nodes",
      changed<{ nodes: number }>("redis", (r) => (r.nodes = 0)),
      /cgs:redis.nodes must be at least 1/,
    ],
    [
      "extra environment for a deployable that does not exist",
      { "cgs:extraEnv": { payments: { A: "1" } } },
      /cgs:extraEnv.payments names no deployable/,
    ],
    [
      "an unquoted number in extra environment",
      { "cgs:extraEnv": { sessions: { SESSION_RATE_PER_MINUTE: 10 } } },
      /cgs:extraEnv.sessions.SESSION_RATE_PER_MINUTE must be a quoted string/,
    ],
    [
      "an extra environment variable that is not an environment name",
      { "cgs:extraEnv": { billing: { "wallet-currency": "USD" } } },
      /cgs:extraEnv.billing must be keyed by environment variable names \(got "wallet-currency"\)/,
    ],
    [
      "the latest image tag on immutable repositories",
      { "cgs:imageTag": "latest" },
      /cgs:imageTag must be an image tag other than latest/,
    ],
    [
      "a domain with a path",
      { "cgs:domain": "play.example.com/app" },
      /cgs:domain must be a lowercase host name/,
    ],
    [
      "a hosted zone id that is not one",
      { "cgs:route53ZoneId": "example.com" },
      /cgs:route53ZoneId must be a Route 53 hosted zone id/,
    ],
    [
      "an issuer over plain HTTP",
      { "cgs:oidcIssuer": "http://id.example.com/realms/cgs" },
      /cgs:oidcIssuer must be an https URL/,
    ],
    ["an empty audience", { "cgs:oidcAudience": " " }, /cgs:oidcAudience must be a non-empty audience/],
    [
      "a sender that is not an address",
      { "cgs:mailFrom": "no-reply" },
      /cgs:mailFrom must be an e-mail address \(got "no-reply"\)/,
    ],
    [
      "a pool floor above its ceiling",
      pools((p) => ((p.warm.min = 4), (p.warm.max = 3))),
      /cgs:capacityPools.warm.min 4 is above cgs:capacityPools.warm.max 3/,
    ],
    [
      "a negative pool ceiling",
      pools((p) => (p.hot.max = -1)),
      /cgs:capacityPools.hot.max must be an integer of at least 0 \(got -1\)/,
    ],
    [
      "a fractional pool floor",
      pools((p) => (p.hot.min = 0.5)),
      /cgs:capacityPools.hot.min must be an integer of at least 0 \(got 0.5\)/,
    ],
    [
      "a pool sized to cover no minutes of demand",
      pools((p) => (p.warm.coverMinutes = 0)),
      /cgs:capacityPools.warm.coverMinutes must be an integer from 1 to 1440 \(got 0\)/,
    ],
    [
      "a pool without its warm sizing",
      pools((p) => delete (p as Partial<CapacityPoolsConfig>).warm),
      /cgs:capacityPools.warm.min must be an integer of at least 0 \(got undefined\)/,
    ],
    [
      "pool launches that never time out",
      pools((p) => (p.launchTimeoutMinutes = 0)),
      /cgs:capacityPools.launchTimeoutMinutes must be an integer of at least 1 \(got 0\)/,
    ],
    [
      "an idle cost in dollars instead of whole cents",
      pools((p) => (p.runningHourCost = 0.587)),
      /cgs:capacityPools.runningHourCost must be an integer of at least 0 \(got 0.587\)/,
    ],
    [
      "a negative stopped-instance cost",
      pools((p) => (p.stoppedHourCost = -1)),
      /cgs:capacityPools.stoppedHourCost must be an integer of at least 0/,
    ],
  ])("when the config has %s, then loading refuses it", (_what, overrides, message) => {
    useStagingConfigWith(overrides);
    expect(() => loadPlatformConfig()).toThrow(message);
  });

  it.each(["cgs:mailFrom", "cgs:workloads", "cgs:capacityPools", "aws:region"])(
    "when %s is missing, then loading names it",
    (key) => {
      useStagingConfigWith({ [key]: undefined });
      expect(() => loadPlatformConfig()).toThrow(key);
    },
  );

  // The private network's key is required by the kind in use: staging runs Headscale (its key is made after the
  // first deploy), so hosted Tailscale's is checked with a Tailscale private network.
  const privateNetworkKeys = ["cgs:tailscaleApiKey", "cgs:headscaleApiKey"];
  it.each(Object.keys(TEST_SECRETS).filter((k) => !privateNetworkKeys.includes(k)))(
    "when the secret %s is not set, then loading names it",
    (key) => {
      useStagingConfigWith({ [key]: undefined });
      expect(() => loadPlatformConfig()).toThrow(key);
    },
  );

  it("when hosted Tailscale is chosen and its API key is not set, then loading names cgs:tailscaleApiKey", () => {
    useStagingConfigWith({
      "cgs:privateNetwork": { kind: "tailscale", tailnet: "-", slots: 10 },
      "cgs:tailscaleApiKey": undefined,
    });
    expect(() => loadPlatformConfig()).toThrow("cgs:tailscaleApiKey");
  });
});

describe("stack configuration: fleet regions (cgs:regions)", () => {
  const EU = { id: "eu-west-1", name: "Europe (Ireland)" };
  const US = { id: "us-east-1", name: "US East (N. Virginia)", cidr: "10.21.0.0/16" };
  const withRegions = (regions: unknown) => useStagingConfigWith({ "cgs:regions": regions });

  it("when staging's regions load, then they keep their order, the home region is marked and zones are filled in", () => {
    withRegions([US, EU]);
    expect(loadPlatformConfig().regions).toEqual([
      {
        id: "us-east-1",
        name: "US East (N. Virginia)",
        home: false,
        cidr: "10.21.0.0/16",
        availabilityZone: "us-east-1a",
      },
      { id: "eu-west-1", name: "Europe (Ireland)", home: true, availabilityZone: "eu-west-1a" },
    ]);
  });

  it("when the home region is not listed, then it is implied first, named by its id, in the cluster's VPC", () => {
    withRegions([US]);
    expect(loadPlatformConfig().regions.map((r) => [r.id, r.name, r.home])).toEqual([
      ["eu-west-1", "eu-west-1", true],
      ["us-east-1", "US East (N. Virginia)", false],
    ]);
  });

  it.each([
    ["no region at all", [], /cgs:regions must be a non-empty list of regions/],
    [
      "a region listed twice",
      [EU, US, { ...US, cidr: "10.22.0.0/16" }],
      /cgs:regions ids lists "us-east-1" twice/,
    ],
    [
      "an id that is no region",
      [EU, { ...US, id: "virginia" }],
      /cgs:regions\[1\]\.id must be an AWS region/,
    ],
    [
      "a region without a name",
      [EU, { ...US, name: "" }],
      /cgs:regions\[1\]\.name must be a name of 1 to 60/,
    ],
    [
      "another region without a cidr",
      [EU, { id: "us-east-1", name: "US" }],
      /cgs:regions\[1\]\.cidr must be an IPv4 CIDR/,
    ],
    [
      "a fleet VPC too large",
      [EU, { ...US, cidr: "10.0.0.0/8" }],
      /cgs:regions\[1\]\.cidr must be an IPv4 CIDR from \/16 to \/24/,
    ],
    [
      "a fleet VPC overlapping the cluster's",
      [EU, { ...US, cidr: "10.20.128.0/20" }],
      /cgs:regions: us-east-1's cidr 10.20.128.0\/20 overlaps cgs:vpcCidr 10.20.0.0\/16/,
    ],
    [
      "two fleet VPCs overlapping",
      [EU, US, { id: "ap-southeast-1", name: "Singapore", cidr: "10.21.64.0/18" }],
      /cgs:regions: ap-southeast-1's cidr 10.21.64.0\/18 overlaps cgs:regions us-east-1 10.21.0.0\/16/,
    ],
    [
      "a fleet VPC inside the private network's range",
      [EU, { ...US, cidr: "100.80.0.0/16" }],
      /overlaps cgs:streaming.privateNetworkCidrs 100.64.0.0\/10/,
    ],
    [
      "a cidr on the home region",
      [{ ...EU, cidr: "10.40.0.0/16" }, US],
      /cgs:regions\[0\]\.cidr: the home region eu-west-1 runs its fleet in cgs:vpcCidr/,
    ],
    [
      "a zone of another region",
      [EU, { ...US, availabilityZone: "eu-west-1a" }],
      /cgs:regions\[1\]\.availabilityZone: "eu-west-1a" is not a zone of us-east-1/,
    ],
    [
      "a home zone the cluster's VPC does not span",
      [{ ...EU, availabilityZone: "eu-west-1c" }, US],
      /cgs:regions\[0\]\.availabilityZone: the home fleet's zone must be one of cgs:availabilityZones/,
    ],
    [
      "an AMI for another region while the stack builds the image",
      [EU, { ...US, amiId: "ami-0123456789abcdef0" }],
      /cgs:regions\[1\]\.amiId is only used with cgs:streaming.amiId/,
    ],
  ])("when cgs:regions has %s, then loading refuses it", (_what, regions, message) => {
    withRegions(regions);
    expect(() => loadPlatformConfig()).toThrow(message);
  });

  it("when streaming.amiId overrides the image and another region names no copy of it, then loading asks for that region's amiId", () => {
    useStagingConfigWith({
      ...changed<{ amiId?: string }>("streaming", (s) => (s.amiId = "ami-0feedfacefeedface")),
      "cgs:regions": [EU, US],
    });
    expect(() => loadPlatformConfig()).toThrow(
      /cgs:regions\[1\]\.amiId must be this region's copy of cgs:streaming.amiId/,
    );
  });
});
