import { mockResources, settled } from "../testing/component-harness";
import type { RecordedResource } from "../testing/stack-harness";
import { ServiceAccountRole, type ServiceAccountRoleArgs } from "./service-account-role";

let resources: RecordedResource[];
beforeAll(async () => {
  resources = await mockResources();
});

let built = 0;
const role = (change: Partial<ServiceAccountRoleArgs> = {}) =>
  new ServiceAccountRole(`role-${++built}`, {
    roleName: "cgs-test-billing",
    namespace: "cgs",
    serviceAccount: "billing",
    oidcProviderArn: "arn:aws:iam::123456789012:oidc-provider/oidc.eks.eu-west-1.amazonaws.com/id/EXAMPLE",
    oidcIssuerUrl: "https://oidc.eks.eu-west-1.amazonaws.com/id/EXAMPLE",
    statements: [
      { Effect: "Allow", Action: ["sqs:SendMessage"], Resource: ["arn:aws:sqs:eu-west-1:123456789012:q"] },
    ],
    tags: {},
    ...change,
  });
const of = (type: string) => resources.filter((r) => r.type === type && r.name === `role-${built}`);

describe("ServiceAccountRole", () => {
  it("when built, then only the one service account may assume the role, and it carries exactly the statements given", async () => {
    role();
    await settled();
    const trust = JSON.parse(of("aws:iam/role:Role")[0]!.inputs.assumeRolePolicy as string);
    const conditions = JSON.stringify(trust.Statement);
    expect(conditions).toContain("system:serviceaccount:cgs:billing");
    const [policy] = of("aws:iam/rolePolicy:RolePolicy");
    expect(JSON.parse(policy!.inputs.policy as string).Statement).toEqual([
      expect.objectContaining({ Action: ["sqs:SendMessage"] }),
    ]);
  });

  it("when there is nothing to allow, then no inline policy is attached", async () => {
    role({ statements: [] });
    await settled();
    expect(of("aws:iam/rolePolicy:RolePolicy")).toEqual([]);
  });

  it.each([
    [
      "a role name over IAM's 64 characters (a long environment)",
      { roleName: `cgs-${"e".repeat(50)}-otel-collector` },
      /IAM role name \(from cgs:environment\) must be at most 64 characters/,
    ],
    [
      "an uppercase namespace",
      { namespace: "CGS" },
      /namespace must be a Kubernetes namespace name \(got "CGS"\)/,
    ],
    [
      "a service account with an underscore",
      { serviceAccount: "auth_proxy" },
      /service account must be a Kubernetes name/,
    ],
  ])("when given %s, then the role is refused", (_what, change, message) => {
    expect(() => role(change)).toThrow(message);
  });
});
