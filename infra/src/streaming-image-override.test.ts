import { StreamingImage } from "./components/streaming-image";
import { ofType, readStackConfig, runStack, type StackRun } from "./testing/stack-harness";
import { inlinePolicyOf } from "./testing/stack-invariants";

// The staging stack through Pulumi mocks with streaming.amiId set: an operator's image overrides the built one.
const OVERRIDE = "ami-0feedfacefeedface";
// AMI ids are regional: the operator names the override's copy in each other fleet region.
const OVERRIDE_US_EAST = "ami-0beadbeadbeadbead";
let run: StackRun;
beforeAll(async () => {
  const config = readStackConfig("staging");
  const streaming = config["cgs:streaming"] as Record<string, unknown>;
  const regions = (config["cgs:regions"] as { id: string }[]).map((r) =>
    r.id === "us-east-1" ? { ...r, amiId: OVERRIDE_US_EAST } : r,
  );
  run = await runStack("staging", {
    "cgs:streaming": { ...streaming, amiId: OVERRIDE },
    "cgs:regions": regions,
  });
}, 120_000);

describe("streaming.amiId as an override", () => {
  it("when streaming.amiId is set, then the launch template starts it and nothing is built", () => {
    const templates = ofType(run, "aws:ec2/launchTemplate:LaunchTemplate");
    expect(templates.map((t) => [t.region, t.inputs.imageId]).sort()).toEqual([
      ["eu-west-1", OVERRIDE],
      ["us-east-1", OVERRIDE_US_EAST],
    ]);
    expect(run.outputs.streamingAmiId).toBe(OVERRIDE);
    expect(ofType(run, "aws:imagebuilder/image:Image")).toEqual([]);
    // The recipe and pipeline stay, so the stack's own image can still be built on demand.
    expect(ofType(run, "aws:imagebuilder/imagePipeline:ImagePipeline")).toHaveLength(1);
  });

  it("when streaming.amiId is set, then the sessions role may launch that AMI and no other", () => {
    const statements = inlinePolicyOf(run, "cgs-staging-sessions").flatMap((p) => p.Statement);
    const images = statements.flatMap((s) => [s.Resource].flat()).filter((r) => r.includes(":image/"));
    expect(images).toEqual([
      `arn:aws:ec2:eu-west-1::image/${OVERRIDE}`,
      `arn:aws:ec2:us-east-1::image/${OVERRIDE_US_EAST}`,
    ]);
  });

  it("when the instance type is not of a GPU family the image supports, then the stack refuses it", () => {
    expect(
      () =>
        new StreamingImage("wrong-family", {
          prefix: "cgs-test",
          region: "eu-west-1",
          instanceType: "m7i.large",
          vpcId: "vpc-1",
          subnetId: "subnet-1",
          revision: 1,
          build: true,
          imageDir: "/nonexistent",
          hostAgent: { bundle: "/nonexistent", unit: "/nonexistent" },
          tags: {},
        }),
    ).toThrow("streaming.instanceType m7i.large is not of a GPU family the image supports (g4dn, g5, g6)");
  });
});
