import * as pulumi from "@pulumi/pulumi";

export interface PolicyStatement {
  Sid?: string;
  Effect: "Allow" | "Deny";
  Action: string[];
  Resource: string | string[];
  Condition?: Record<string, Record<string, string | string[]>>;
}

export interface PolicyDocument {
  Version: "2012-10-17";
  Statement: PolicyStatement[];
}

/** A statement whose strings may still be unresolved outputs (ARNs of resources being created). */
export interface PolicyStatementArgs {
  Sid?: string;
  Effect: "Allow" | "Deny";
  Action: string[];
  Resource: pulumi.Input<string> | pulumi.Input<string>[];
  Condition?: Record<string, Record<string, pulumi.Input<string> | pulumi.Input<string>[]>>;
}

/**
 * Actions AWS authorises only against `*` (no resource-level permissions). Anything else must
 * name its resources; tests hold every policy in the program to this.
 */
export const ACTIONS_ONLY_ON_ANY_RESOURCE: readonly RegExp[] = [
  /^ec2:Describe[A-Za-z*]*$/,
  /^ec2:GetSecurityGroupsForVpc$/,
  /^elasticloadbalancing:Describe[A-Za-z*]*$/,
  /^xray:(PutTraceSegments|PutTelemetryRecords|GetSamplingRules|GetSamplingTargets|GetSamplingStatisticSummaries)$/,
  /^acm:ListCertificates$/,
  /^iam:ListServerCertificates$/,
];

export function onlyOnAnyResource(action: string): boolean {
  return ACTIONS_ONLY_ON_ANY_RESOURCE.some((re) => re.test(action));
}

export function policyJson(statements: PolicyStatementArgs[]): pulumi.Output<string> {
  return pulumi.output(statements).apply((resolved) => {
    const doc: PolicyDocument = { Version: "2012-10-17", Statement: resolved as PolicyStatement[] };
    return JSON.stringify(doc);
  });
}

/** Trust policy for IAM roles for service accounts: one service account in one namespace. */
export function serviceAccountTrustPolicy(args: {
  oidcProviderArn: pulumi.Input<string>;
  oidcIssuerUrl: pulumi.Input<string>;
  namespace: string;
  serviceAccount: string;
}): pulumi.Output<string> {
  return pulumi.all([args.oidcProviderArn, args.oidcIssuerUrl]).apply(([providerArn, issuerUrl]) => {
    const issuer = issuerUrl.replace(/^https:\/\//, "");
    return JSON.stringify({
      Version: "2012-10-17",
      Statement: [
        {
          Effect: "Allow",
          Principal: { Federated: providerArn },
          Action: "sts:AssumeRoleWithWebIdentity",
          Condition: {
            StringEquals: {
              [`${issuer}:sub`]: `system:serviceaccount:${args.namespace}:${args.serviceAccount}`,
              [`${issuer}:aud`]: "sts.amazonaws.com",
            },
          },
        },
      ],
    });
  });
}

export function servicePrincipalTrustPolicy(service: string): string {
  return JSON.stringify({
    Version: "2012-10-17",
    Statement: [{ Effect: "Allow", Principal: { Service: service }, Action: "sts:AssumeRole" }],
  });
}
