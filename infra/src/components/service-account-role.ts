import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { DNS_LABEL, matching } from "../config-checks";
import { policyJson, serviceAccountTrustPolicy, type PolicyStatementArgs } from "../iam-policy";

export interface ServiceAccountRoleArgs {
  roleName: string;
  namespace: string;
  serviceAccount: string;
  oidcProviderArn: pulumi.Input<string>;
  oidcIssuerUrl: pulumi.Input<string>;
  /** Everything this workload may do; nothing else is attached. */
  statements: PolicyStatementArgs[];
  tags: Record<string, string>;
}

/** IAM role assumable only by one Kubernetes service account (IRSA), with one inline policy. */
export class ServiceAccountRole extends pulumi.ComponentResource {
  readonly roleArn: pulumi.Output<string>;
  readonly roleName: pulumi.Output<string>;

  constructor(name: string, args: ServiceAccountRoleArgs, opts?: pulumi.ComponentResourceOptions) {
    super("cgs:infra:ServiceAccountRole", name, {}, opts);
    // cgs-<environment>-<workload>: IAM stops role names at 64 characters.
    matching(
      "IAM role name (from cgs:environment)",
      args.roleName,
      /^[\w+=,.@-]{1,64}$/,
      "at most 64 characters of IAM's set",
    );
    matching("namespace", args.namespace, DNS_LABEL, "a Kubernetes namespace name");
    matching(
      "service account",
      args.serviceAccount,
      /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/,
      "a Kubernetes name",
    );
    const role = new aws.iam.Role(
      name,
      {
        name: args.roleName,
        assumeRolePolicy: serviceAccountTrustPolicy(args),
        maxSessionDuration: 3600,
        tags: { ...args.tags, "cgs:service-account": `${args.namespace}/${args.serviceAccount}` },
      },
      { parent: this },
    );
    if (args.statements.length > 0) {
      new aws.iam.RolePolicy(name, { role: role.id, policy: policyJson(args.statements) }, { parent: this });
    }
    this.roleArn = role.arn;
    this.roleName = role.name;
    this.registerOutputs({ roleArn: this.roleArn });
  }
}
