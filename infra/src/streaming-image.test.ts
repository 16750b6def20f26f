import * as fs from "node:fs";
import * as path from "node:path";
import { COMPONENT_FILES } from "./components/streaming-image";
import { STREAMING_IMAGE_DIR, contentVersion } from "./streaming-image-sources";
import { GPU_FAMILIES, STREAMING_IMAGE_PINS } from "./streaming-image-versions";
import {
  BUILT_AMI_ID,
  copiedAmiId,
  ofType,
  parsePolicy,
  runStack,
  type StackRun,
} from "./testing/stack-harness";
import { inlinePolicyOf, platformValues } from "./testing/stack-invariants";

// The prod stack (g5.xlarge) through Pulumi mocks, without streaming.amiId: the stack builds its own image.
let run: StackRun;
beforeAll(async () => {
  run = await runStack("prod");
}, 120_000);

const one = (type: string) => {
  const found = ofType(run, type);
  expect(found).toHaveLength(1);
  return found[0]!;
};

interface RecipeComponent {
  componentArn: string;
  parameters: { name: string; value: string }[];
}

function recipeParameters(): Record<string, Record<string, string>> {
  const recipe = one("aws:imagebuilder/imageRecipe:ImageRecipe");
  return Object.fromEntries(
    (recipe.inputs.components as RecipeComponent[]).map((c) => [
      c.componentArn.split("/")[1]!.replace(/^cgs-prod-/, ""),
      Object.fromEntries(c.parameters.map((p) => [p.name, p.value])),
    ]),
  );
}

describe("the streaming image recipe", () => {
  it("when the stack builds the image, then Ubuntu 24.04 LTS is the parent and the components run in order", () => {
    const recipe = one("aws:imagebuilder/imageRecipe:ImageRecipe");
    expect(recipe.inputs.parentImage).toBe(
      "ssm:/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id",
    );
    expect(Object.keys(recipeParameters())).toEqual([
      "streaming-base",
      "nvidia-gaming-driver",
      "sunshine",
      "tailscale",
      "streaming-host",
    ]);
    expect(recipe.inputs.blockDeviceMappings).toEqual([
      expect.objectContaining({
        deviceName: "/dev/sda1",
        ebs: expect.objectContaining({ encrypted: "true", volumeType: "gp3" }),
      }),
    ]);
  });

  it("when the recipe is written, then Sunshine, Tailscale and Node.js are the pinned versions and the driver is the fleet family's", () => {
    const params = recipeParameters();
    expect(params.sunshine).toEqual({
      SunshineVersion: STREAMING_IMAGE_PINS.sunshine.version,
      SunshineUrl: STREAMING_IMAGE_PINS.sunshine.url,
      SunshineSha256: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    expect(params.tailscale).toEqual({
      TailscaleVersion: STREAMING_IMAGE_PINS.tailscale.version,
      TailscaleKeyFingerprint: expect.stringMatching(/^[0-9A-F]{40}$/),
    });
    // prod runs g5.xlarge: the A10G, whose GSP firmware AWS says to turn off.
    expect(params["nvidia-gaming-driver"]).toEqual({
      DriverS3Prefix: STREAMING_IMAGE_PINS.nvidiaGamingDriverPrefix,
      DisableGsp: "true",
      GpuName: GPU_FAMILIES.g5!.gpu,
    });
    expect(params["streaming-host"]).toMatchObject({
      NodeVersion: expect.stringMatching(/^24\./),
      HostAgentS3Uri: expect.stringMatching(
        /^s3:\/\/cgs-prod-image-inputs-\w+\/host-agent\/[0-9a-f]{16}\/cgs-host-agent\.cjs$/,
      ),
      GpuName: "A10G",
    });
    expect(params["streaming-base"]?.ImageFilesS3Uri).toMatch(/\/image-files\/[0-9a-f]{16}\.zip$/);
  });

  it("when components are created, then each carries its document verbatim at a version derived from it", () => {
    const components = ofType(run, "aws:imagebuilder/component:Component");
    expect(components.map((c) => c.inputs.name)).toEqual(
      COMPONENT_FILES.map((f) => `cgs-prod-${f.replace(/\.yaml$/, "")}`),
    );
    for (const [i, file] of COMPONENT_FILES.entries()) {
      const data = fs.readFileSync(path.join(STREAMING_IMAGE_DIR, "components", file), "utf8");
      expect(components[i]!.inputs).toMatchObject({ data, version: contentVersion(data), platform: "Linux" });
    }
    expect(contentVersion("a")).not.toBe(contentVersion("b"));
    expect(contentVersion("a")).toMatch(/^1\.0\.\d{1,9}$/);
  });

  it("when the build infrastructure is set up, then it is the fleet's GPU type in a private subnet, IMDSv2 only, no key pair, nothing in", () => {
    const infra = one("aws:imagebuilder/infrastructureConfiguration:InfrastructureConfiguration");
    expect(infra.inputs).toMatchObject({
      instanceTypes: ["g5.xlarge"],
      terminateInstanceOnFailure: true,
      instanceMetadataOptions: { httpTokens: "required", httpPutResponseHopLimit: 1 },
    });
    expect(infra.inputs.keyPair).toBeUndefined();
    const privateSubnets = ofType(run, "aws:ec2/subnet:Subnet")
      .filter((s) => s.inputs.mapPublicIpOnLaunch === false)
      .map((s) => `${s.name}-id`);
    expect(privateSubnets).toContain(infra.inputs.subnetId);
    const sg = ofType(run, "aws:ec2/securityGroup:SecurityGroup").find(
      (g) => g.name === "streaming-image-build",
    );
    expect(sg?.inputs.ingress).toEqual([]);
    expect((sg?.inputs.egress as { fromPort: number }[]).map((r) => r.fromPort)).toEqual([80, 443]);
  });

  it("when the stack runs, then `pulumi up` itself builds the image, tested, and a pipeline can rebuild the same recipe", () => {
    const image = one("aws:imagebuilder/image:Image");
    const pipeline = one("aws:imagebuilder/imagePipeline:ImagePipeline");
    const recipeArn = expect.stringContaining(":image-recipe/cgs-prod-streaming/");
    expect(image.inputs).toMatchObject({
      imageRecipeArn: recipeArn,
      imageTestsConfiguration: { imageTestsEnabled: true },
    });
    expect(pipeline.inputs).toMatchObject({ imageRecipeArn: recipeArn, status: "ENABLED" });
    expect(pipeline.inputs.schedule).toBeUndefined();
    const distribution = one("aws:imagebuilder/distributionConfiguration:DistributionConfiguration");
    // One build, copied to every fleet region by the distribution: the home region first.
    expect(distribution.inputs.distributions).toEqual(
      ["eu-west-1", "us-east-1", "ap-southeast-1"].map((region) =>
        expect.objectContaining({
          region,
          amiDistributionConfiguration: expect.objectContaining({
            name: "cgs-prod-streaming-{{imagebuilder:buildDate}}",
          }),
        }),
      ),
    );
    expect(distribution.inputs.distributions).not.toContainEqual(
      expect.objectContaining({ launchTemplateConfigurations: expect.anything() }),
    );
  });
});

describe("the launch template and the built image", () => {
  it("when no amiId overrides it, then the launch template starts the built AMI, IMDSv2 only, and a new image becomes its default version", () => {
    const templates = ofType(run, "aws:ec2/launchTemplate:LaunchTemplate");
    expect(templates.map((t) => [t.region, t.inputs.imageId]).sort()).toEqual([
      ["ap-southeast-1", copiedAmiId("ap-southeast-1")],
      ["eu-west-1", BUILT_AMI_ID],
      ["us-east-1", copiedAmiId("us-east-1")],
    ]);
    const template = templates.find((t) => t.name === "streaming")!;
    expect(template.inputs).toMatchObject({
      imageId: BUILT_AMI_ID,
      updateDefaultVersion: true,
      metadataOptions: { httpTokens: "required", httpPutResponseHopLimit: 1 },
      iamInstanceProfile: { arn: "arn:aws:iam::123456789012:instance-profile/cgs-prod-streaming-host" },
    });
    expect(run.outputs.streamingAmiId).toBe(BUILT_AMI_ID);
  });

  it("when sessions launches instances, then it may start only the built AMI and pass only the streaming host role to EC2", () => {
    const statements = inlinePolicyOf(run, "cgs-prod-sessions").flatMap((p) => p.Statement);
    const launch = statements.find((s) => s.Sid === "LaunchFromTheStreamingTemplateOnly");
    expect([launch!.Resource].flat().filter((r) => r.includes(":image/"))).toEqual([
      `arn:aws:ec2:eu-west-1::image/${BUILT_AMI_ID}`,
      `arn:aws:ec2:us-east-1::image/${copiedAmiId("us-east-1")}`,
      `arn:aws:ec2:ap-southeast-1::image/${copiedAmiId("ap-southeast-1")}`,
    ]);
    const passRole = statements.filter((s) => s.Action.includes("iam:PassRole"));
    expect(passRole).toEqual([
      {
        Sid: "PassTheStreamingHostRoleToEc2",
        Effect: "Allow",
        Action: ["iam:PassRole"],
        Resource: ["arn:aws:iam::123456789012:role/cgs-prod-streaming-host"],
        Condition: { StringEquals: { "iam:PassedToService": "ec2.amazonaws.com" } },
      },
    ]);
  });
});

describe("the streaming instances' rights", () => {
  it("when the instance profile's role is written, then it may only send to the host-reports queue", () => {
    const role = ofType(run, "aws:iam/role:Role").find((r) => r.inputs.name === "cgs-prod-streaming-host");
    expect(JSON.parse(role?.inputs.assumeRolePolicy as string)).toEqual({
      Version: "2012-10-17",
      Statement: [{ Effect: "Allow", Principal: { Service: "ec2.amazonaws.com" }, Action: "sts:AssumeRole" }],
    });
    expect(inlinePolicyOf(run, "cgs-prod-streaming-host")).toEqual([
      {
        Version: "2012-10-17",
        Statement: [
          {
            Sid: "SendHostReports",
            Effect: "Allow",
            Action: ["sqs:SendMessage"],
            Resource: ["arn:aws:sqs:eu-west-1:123456789012:prod-cgs-host-reports"],
          },
        ],
      },
    ]);
    const attached = ofType(run, "aws:iam/rolePolicyAttachment:RolePolicyAttachment").filter(
      (a) => a.inputs.role === "cgs-prod-streaming-host",
    );
    expect(attached).toEqual([]);
    const profile = ofType(run, "aws:iam/instanceProfile:InstanceProfile").find(
      (p) => p.inputs.name === "cgs-prod-streaming-host",
    );
    expect(profile?.inputs.role).toBe("cgs-prod-streaming-host");
  });

  it("when the image build's role is written, then it reads only the stack's build inputs and AWS's gaming driver", () => {
    const [policy] = inlinePolicyOf(run, "cgs-prod-image-build");
    const bucket = one("aws:s3/bucket:Bucket");
    const bucketArn = `arn:aws:s3:::${String(bucket.inputs.bucketPrefix)}0001`;
    expect(policy?.Statement).toEqual([
      {
        Sid: "ReadImageBuildInputs",
        Effect: "Allow",
        Action: ["s3:GetObject"],
        Resource: [`${bucketArn}/image-files/*`, `${bucketArn}/host-agent/*`],
      },
      {
        Sid: "ListNvidiaGamingDrivers",
        Effect: "Allow",
        Action: ["s3:ListBucket"],
        Resource: ["arn:aws:s3:::nvidia-gaming"],
        Condition: { StringLike: { "s3:prefix": ["linux/*"] } },
      },
      {
        Sid: "ReadNvidiaGamingDrivers",
        Effect: "Allow",
        Action: ["s3:GetObject"],
        Resource: ["arn:aws:s3:::nvidia-gaming/linux/*"],
      },
    ]);
    const attached = ofType(run, "aws:iam/rolePolicyAttachment:RolePolicyAttachment")
      .filter((a) => a.inputs.role === "cgs-prod-image-build")
      .map((a) => a.inputs.policyArn);
    expect(attached.sort()).toEqual([
      "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
      "arn:aws:iam::aws:policy/EC2InstanceProfileForImageBuilder",
    ]);
    const block = one("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock");
    expect(block.inputs).toMatchObject({
      blockPublicAcls: true,
      blockPublicPolicy: true,
      restrictPublicBuckets: true,
    });
  });

  it("when the sessions role touches the host-reports queue, then it receives, deletes and changes visibility, and its env names the queue", () => {
    const statements = inlinePolicyOf(run, "cgs-prod-sessions").flatMap((p) => p.Statement);
    const reports = statements.find((s) => s.Sid === "ConsumeHostReports");
    expect(reports?.Action).toEqual(
      expect.arrayContaining(["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"]),
    );
    expect(reports?.Action).not.toContain("sqs:SendMessage");
    expect(reports?.Resource).toEqual(["arn:aws:sqs:eu-west-1:123456789012:prod-cgs-host-reports"]);
    const env = platformValues(run).services.sessions?.env ?? {};
    expect(`${env.QUEUE_NAME_PREFIX}${env.HOST_REPORT_QUEUE_NAME}`).toBe("prod-cgs-host-reports");
    expect(run.outputs.hostReportsQueueUrl).toBe(
      "https://sqs.eu-west-1.amazonaws.com/123456789012/prod-cgs-host-reports",
    );
    const senders = ofType(run, "aws:iam/rolePolicy:RolePolicy")
      .filter((p) =>
        parsePolicy(p.inputs.policy).Statement.some(
          (s) =>
            s.Action.includes("sqs:SendMessage") &&
            [s.Resource].flat().some((r) => r.endsWith(":prod-cgs-host-reports")),
        ),
      )
      .map((p) => p.name);
    expect(senders).toEqual(["streaming-host"]);
  });
});
