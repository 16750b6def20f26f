import * as fs from "node:fs";
import * as path from "node:path";
import { REQUIRED_CONFIG_KEYS, SECRET_CONFIG_KEYS } from "./config";
import { broadGrants, readStackConfig } from "./testing/stack-harness";
import { subnetCidrs } from "./components/network";

const STACKS = ["staging", "prod"];

function programSources(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return e.name === "testing" ? [] : programSources(p);
    return e.name.endsWith(".ts") && !e.name.endsWith(".test.ts") ? [p] : [];
  });
}

describe("staging and prod differ only through config", () => {
  it("when both stack files are read, then they set exactly the same keys, all the program requires", () => {
    const expected = ["aws:region", ...REQUIRED_CONFIG_KEYS.map((k) => `cgs:${k}`)].sort();
    for (const stack of STACKS) expect(Object.keys(readStackConfig(stack)).sort()).toEqual(expected);
  });

  it("when the stack files are read, then no secret is committed in them", () => {
    for (const stack of STACKS) {
      const keys = Object.keys(readStackConfig(stack));
      for (const secret of SECRET_CONFIG_KEYS) expect(keys).not.toContain(`cgs:${secret}`);
    }
  });

  it("when the program source is scanned, then nothing branches on the stack or project name", () => {
    const offenders = programSources(__dirname).filter((file) =>
      /getStack\(|getProject\(|["'](staging|prod)["']/.test(fs.readFileSync(file, "utf8")),
    );
    expect(offenders).toEqual([]);
  });
});

describe("IAM breadth checker", () => {
  it("when a statement grants a resource-scoped action on *, then it is reported", () => {
    expect(broadGrants({ Effect: "Allow", Action: ["sqs:SendMessage"], Resource: "*" })).toHaveLength(1);
    expect(broadGrants({ Effect: "Allow", Action: ["s3:*"], Resource: ["arn:aws:s3:::b/*"] })).toHaveLength(
      1,
    );
  });

  it("when only Describe-style actions use *, then nothing is reported", () => {
    expect(
      broadGrants({
        Effect: "Allow",
        Action: ["ec2:DescribeInstances", "xray:PutTraceSegments"],
        Resource: "*",
      }),
    ).toEqual([]);
  });
});

describe("subnet layout", () => {
  it("when a /16 is split over three zones, then public and private ranges do not overlap", () => {
    expect(subnetCidrs("10.30.0.0/16", 3)).toEqual({
      public: ["10.30.0.0/22", "10.30.4.0/22", "10.30.8.0/22"],
      private: ["10.30.64.0/20", "10.30.80.0/20", "10.30.96.0/20"],
    });
  });
});
