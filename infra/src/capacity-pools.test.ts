import type { PolicyStatement } from "./iam-policy";
import { runStack, type StackRun } from "./testing/stack-harness";
import { inlinePolicyOf } from "./testing/stack-invariants";

// What the sessions role may do to the capacity pools' instances: the prod stack through Pulumi mocks.
let run: StackRun;
beforeAll(async () => {
  run = await runStack("prod");
}, 120_000);

const INSTANCES = "arn:aws:ec2:eu-west-1:123456789012:instance/*";
// Prod's fleet regions: the pools' rules hold in each of them alike.
const EVERY_FLEET_INSTANCE = ["eu-west-1", "us-east-1", "ap-southeast-1"].map(
  (region) => `arn:aws:ec2:${region}:123456789012:instance/*`,
);
const POOL_INSTANCE = {
  StringEquals: { "aws:ResourceTag/cgs-prod:managed-by": "sessions" },
  StringLike: { "aws:ResourceTag/cgs-prod:pool-id": "*" },
};

function sessionsStatements(): PolicyStatement[] {
  return inlinePolicyOf(run, "cgs-prod-sessions").flatMap((p) => p.Statement);
}
const bySid = (sid: string) => sessionsStatements().find((s) => s.Sid === sid);
const granting = (action: string) => sessionsStatements().filter((s) => s.Action.includes(action));

describe("the sessions role and the capacity pools", () => {
  it("when a pool instance is started, stopped or terminated, then only one the service manages and pooled", () => {
    expect(bySid("ControlPoolInstances")).toEqual({
      Sid: "ControlPoolInstances",
      Effect: "Allow",
      Action: ["ec2:StartInstances", "ec2:StopInstances", "ec2:TerminateInstances"],
      Resource: EVERY_FLEET_INSTANCE,
      Condition: POOL_INSTANCE,
    });
  });

  it("when a start claims a pool instance, then it may add only its session, account and managed-by tags, and managed-by only as sessions", () => {
    expect(bySid("ClaimPoolInstances")).toEqual({
      Sid: "ClaimPoolInstances",
      Effect: "Allow",
      Action: ["ec2:CreateTags"],
      Resource: EVERY_FLEET_INSTANCE,
      Condition: {
        ...POOL_INSTANCE,
        "ForAllValues:StringEquals": {
          "aws:TagKeys": ["cgs-prod:account-id", "cgs-prod:session-id", "cgs-prod:managed-by"],
        },
        StringEqualsIfExists: { "aws:RequestTag/cgs-prod:managed-by": "sessions" },
      },
    });
  });

  it("when an account's volume goes to a pool instance, then the instance must be a managed pool instance and the volume the account's", () => {
    expect(bySid("AttachVolumesToPoolInstances")).toEqual({
      Sid: "AttachVolumesToPoolInstances",
      Effect: "Allow",
      Action: ["ec2:AttachVolume"],
      Resource: EVERY_FLEET_INSTANCE,
      Condition: POOL_INSTANCE,
    });
    const volumeSide = granting("ec2:AttachVolume").filter((s) =>
      [s.Resource].flat().some((r) => r.includes(":volume/")),
    );
    expect(volumeSide).toHaveLength(1);
    expect(volumeSide[0]!.Condition).toEqual({
      StringLike: { "aws:ResourceTag/cgs-prod:account-id": "*" },
    });
  });

  it("when sessions tags an instance that exists already, then no statement lets it without the managed-by condition", () => {
    for (const s of granting("ec2:CreateTags")) {
      const whileCreating = s.Condition?.StringEquals?.["ec2:CreateAction"];
      if (whileCreating !== undefined) continue;
      expect(s.Condition?.StringEquals?.["aws:ResourceTag/cgs-prod:managed-by"]).toBe("sessions");
      const keys = [s.Condition?.["ForAllValues:StringEquals"]?.["aws:TagKeys"]].flat();
      expect(keys).not.toContain("cgs-prod:pool-id");
      expect(keys).not.toContainEqual(expect.stringContaining("*"));
    }
    expect(sessionsStatements().flatMap((s) => s.Action)).not.toContain("ec2:DeleteTags");
  });

  it("when an instance carries no account, then every write on it needs the managed-by and pool-id tags", () => {
    const writes = ["ec2:StartInstances", "ec2:StopInstances", "ec2:TerminateInstances", "ec2:AttachVolume"];
    for (const action of writes) {
      for (const s of granting(action).filter((st) => [st.Resource].flat().includes(INSTANCES))) {
        const byAccount = s.Condition?.StringLike?.["aws:ResourceTag/cgs-prod:account-id"] === "*";
        if (byAccount) continue;
        expect(s.Condition).toMatchObject(POOL_INSTANCE);
      }
    }
    // A pool instance is never rebooted: it is stopped, started or replaced.
    const reboot = granting("ec2:RebootInstances");
    for (const s of reboot) expect(s.Condition).not.toMatchObject(POOL_INSTANCE);
  });

  it("when a pool launch tags its instance as the service does (pool-id, managed-by), then the launch statement admits those tags", () => {
    const launch = bySid("LaunchTaggedInstances");
    expect(launch?.Resource).toContain(INSTANCES);
    expect(launch?.Condition).toEqual({ "ForAnyValue:StringLike": { "aws:TagKeys": ["cgs-prod:*"] } });
    const template = run.resources.find((r) => r.type === "aws:ec2/launchTemplate:LaunchTemplate");
    const tagSpecs = template?.inputs.tagSpecifications as {
      resourceType: string;
      tags: Record<string, string>;
    }[];
    expect(tagSpecs.find((t) => t.resourceType === "instance")?.tags["cgs-prod:managed-by"]).toBe("sessions");
  });
});
