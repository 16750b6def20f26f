import { DEPLOYABLES } from "./service-catalog";
import { runStack, ofType, type StackRun } from "./testing/stack-harness";
import { describeStackInvariants, platformValues } from "./testing/stack-invariants";
import { describeStackOutputs } from "./testing/stack-outputs";
import { describeFleetRegions } from "./testing/stack-regions";

let run: StackRun;
beforeAll(async () => {
  run = await runStack("prod");
}, 120_000);

describeStackInvariants("prod", () => run);
describeStackOutputs("prod", () => run);
describeFleetRegions("prod", () => run);

describe("stack prod: production guarantees", () => {
  it("when prod runs, then the database is Multi-AZ, encrypted, backed up and protected from deletion", () => {
    const [db] = ofType(run, "aws:rds/instance:Instance");
    expect(db?.inputs).toMatchObject({
      multiAz: true,
      storageEncrypted: true,
      deletionProtection: true,
      skipFinalSnapshot: false,
    });
    expect(db?.inputs.backupRetentionPeriod).toBeGreaterThanOrEqual(7);
  });

  it("when prod runs, then every deployable has at least two replicas and a PDB", () => {
    const values = platformValues(run);
    const workloads = [...DEPLOYABLES.map((d) => values.services[d.name]), values.otelCollector];
    for (const w of workloads) {
      expect(w?.replicas).toBeGreaterThanOrEqual(2);
      expect(w?.autoscaling.minReplicas).toBeGreaterThanOrEqual(2);
      expect(w?.pdb.enabled).toBe(true);
    }
  });

  it("when prod runs, then NAT, Redis and nodes survive the loss of one zone", () => {
    expect(ofType(run, "aws:ec2/natGateway:NatGateway").length).toBeGreaterThanOrEqual(2);
    expect(ofType(run, "aws:elasticache/replicationGroup:ReplicationGroup")[0]?.inputs).toMatchObject({
      automaticFailoverEnabled: true,
      multiAzEnabled: true,
      transitEncryptionEnabled: true,
      atRestEncryptionEnabled: true,
    });
    for (const g of ofType(run, "aws:eks/nodeGroup:NodeGroup")) {
      expect((g.inputs.scalingConfig as { minSize: number }).minSize).toBeGreaterThanOrEqual(2);
    }
  });
});

describe("stack prod: capacity pools", () => {
  it("when sessions is configured, then it runs a hot instance always up and up to 40 warm ones, with the idle cost of its instance type", () => {
    expect(platformValues(run).services.sessions?.env).toMatchObject({
      POOL_HOT_MIN: "1",
      POOL_HOT_MAX: "10",
      POOL_HOT_COVER_MINUTES: "2",
      POOL_WARM_MIN: "3",
      POOL_WARM_MAX: "40",
      POOL_WARM_COVER_MINUTES: "10",
      POOL_SHRINK_AFTER_MINUTES: "15",
      POOL_LAUNCH_TIMEOUT_MINUTES: "20",
      POOL_RUNNING_HOUR_COST: "112",
      POOL_STOPPED_HOUR_COST: "2",
      HOST_ASSIGN_PORT: "47991",
    });
  });
});
