import { DEPLOYABLES } from "./service-catalog";
import { runStack, ofType, type StackRun } from "./testing/stack-harness";
import { describeStackInvariants, platformValues } from "./testing/stack-invariants";
import { describeStackOutputs } from "./testing/stack-outputs";

let run: StackRun;
beforeAll(async () => {
  run = await runStack("prod");
}, 120_000);

describeStackInvariants("prod", () => run);
describeStackOutputs("prod", () => run);

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
