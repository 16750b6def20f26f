import * as pulumi from "@pulumi/pulumi";
import { mockResources, settled } from "../testing/component-harness";
import type { RecordedResource } from "../testing/stack-harness";
import { AppSecrets, type AppSecretsArgs } from "./app-secrets";

let resources: RecordedResource[];
beforeAll(async () => {
  resources = await mockResources();
});

let built = 0;
const secrets = (change: Partial<AppSecretsArgs> = {}) =>
  new AppSecrets(`secrets-${++built}`, {
    prefix: "cgs-test",
    stripeSecretKey: pulumi.secret("sk_test_1"),
    stripeWebhookSecret: pulumi.secret("whsec_1"),
    keycloakAdminClientId: "cgs-auth-proxy",
    keycloakAdminClientSecret: pulumi.secret("kc"),
    smtpUrl: pulumi.secret("smtps://u:p@smtp.example.com:465"),
    privateNetworkApiKey: pulumi.secret("tskey-api-1"),
    tags: {},
    ...change,
  });

describe("AppSecrets", () => {
  it("when built, then each third party's credentials live in one named entry under the prefix", async () => {
    secrets();
    await settled();
    const names = resources
      .filter((r) => r.type === "aws:secretsmanager/secret:Secret" && r.name.startsWith(`secrets-${built}-`))
      .map((r) => r.inputs.name);
    expect(names).toEqual([
      "cgs-test/stripe",
      "cgs-test/identity-provider",
      "cgs-test/smtp",
      "cgs-test/streaming",
    ]);
  });

  it.each([
    [
      "an empty prefix",
      { prefix: "" },
      /secret name prefix must be a Secrets Manager name prefix \(got ""\)/,
    ],
    [
      "a prefix with a space",
      { prefix: "cgs test" },
      /secret name prefix must be a Secrets Manager name prefix/,
    ],
    [
      "an empty admin client id",
      { keycloakAdminClientId: "" },
      /cgs:keycloakAdminClientId must be a non-empty client id/,
    ],
  ])("when given %s, then the secrets are refused", (_what, change, message) => {
    expect(() => secrets(change)).toThrow(message);
  });
});
