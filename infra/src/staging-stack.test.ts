import { runStack, ofType, type StackRun } from "./testing/stack-harness";
import { describeStackInvariants, platformValues } from "./testing/stack-invariants";
import { describeStackOutputs } from "./testing/stack-outputs";

let run: StackRun;
beforeAll(async () => {
  run = await runStack("staging");
}, 120_000);

describeStackInvariants("staging", () => run);
describeStackOutputs("staging", () => run);

describe("stack staging: sized small through its config", () => {
  it("when staging runs, then it shares one NAT gateway and a single-AZ database", () => {
    expect(ofType(run, "aws:ec2/natGateway:NatGateway")).toHaveLength(1);
    expect(ofType(run, "aws:rds/instance:Instance")[0]?.inputs.multiAz).toBe(false);
    expect(platformValues(run).services.gateway?.replicas).toBe(1);
  });
});
