import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { matching } from "../config-checks";
import type { PolicyStatementArgs } from "../iam-policy";
import { ServiceAccountRole } from "./service-account-role";

/** Upstream charts the platform relies on; bump here. */
export const ADDON_CHARTS = {
  loadBalancerController: {
    chart: "aws-load-balancer-controller",
    version: "1.11.0",
    repo: "https://aws.github.io/eks-charts",
  },
  secretsStoreCsiDriver: {
    chart: "secrets-store-csi-driver",
    version: "1.4.7",
    repo: "https://kubernetes-sigs.github.io/secrets-store-csi-driver/charts",
  },
  secretsStoreAwsProvider: {
    chart: "secrets-store-csi-driver-provider-aws",
    version: "0.3.11",
    repo: "https://aws.github.io/secrets-store-csi-driver-provider-aws",
  },
  metricsServer: {
    chart: "metrics-server",
    version: "3.12.2",
    repo: "https://kubernetes-sigs.github.io/metrics-server/",
  },
} as const;

export interface ClusterAddonsArgs {
  clusterName: pulumi.Input<string>;
  region: string;
  accountId: pulumi.Input<string>;
  vpcId: pulumi.Input<string>;
  clusterSecurityGroupId: pulumi.Input<string>;
  oidcProviderArn: pulumi.Input<string>;
  oidcIssuerUrl: pulumi.Input<string>;
  roleNamePrefix: string;
  tags: Record<string, string>;
  provider: k8s.Provider;
}

/**
 * Load balancer controller scoped to the load balancers it names (k8s-*) and the security groups
 * it tags; AWS only allows `*` for its Describe calls.
 */
export function loadBalancerControllerStatements(a: {
  region: string;
  accountId: pulumi.Input<string>;
  clusterName: pulumi.Input<string>;
  vpcId: pulumi.Input<string>;
  clusterSecurityGroupId: pulumi.Input<string>;
}): PolicyStatementArgs[] {
  const elb = pulumi.interpolate`arn:aws:elasticloadbalancing:${a.region}:${a.accountId}`;
  const ec2 = pulumi.interpolate`arn:aws:ec2:${a.region}:${a.accountId}`;
  const loadBalancers = pulumi.interpolate`${elb}:loadbalancer/app/k8s-*/*`;
  const targetGroups = pulumi.interpolate`${elb}:targetgroup/k8s-*/*`;
  const listeners = pulumi.interpolate`${elb}:listener/app/k8s-*/*/*`;
  const rules = pulumi.interpolate`${elb}:listener-rule/app/k8s-*/*/*/*`;
  const ownedSecurityGroups = { StringEquals: { "aws:ResourceTag/elbv2.k8s.aws/cluster": a.clusterName } };
  return [
    {
      Sid: "DescribeHasNoResourceLevelPermissions",
      Effect: "Allow",
      Action: [
        "ec2:Describe*",
        "ec2:GetSecurityGroupsForVpc",
        "elasticloadbalancing:Describe*",
        "acm:ListCertificates",
      ],
      Resource: "*",
    },
    {
      Sid: "ReadCertificates",
      Effect: "Allow",
      Action: ["acm:DescribeCertificate"],
      Resource: [pulumi.interpolate`arn:aws:acm:${a.region}:${a.accountId}:certificate/*`],
    },
    {
      Sid: "ElbServiceLinkedRole",
      Effect: "Allow",
      Action: ["iam:CreateServiceLinkedRole"],
      Resource: [
        pulumi.interpolate`arn:aws:iam::${a.accountId}:role/aws-service-role/elasticloadbalancing.amazonaws.com/AWSServiceRoleForElasticLoadBalancing`,
      ],
      Condition: { StringEquals: { "iam:AWSServiceName": "elasticloadbalancing.amazonaws.com" } },
    },
    {
      Sid: "CreateSecurityGroupsInTheVpc",
      Effect: "Allow",
      Action: ["ec2:CreateSecurityGroup"],
      Resource: [pulumi.interpolate`${ec2}:vpc/${a.vpcId}`, pulumi.interpolate`${ec2}:security-group/*`],
    },
    {
      Sid: "TagSecurityGroupsWhileCreating",
      Effect: "Allow",
      Action: ["ec2:CreateTags"],
      Resource: [pulumi.interpolate`${ec2}:security-group/*`],
      Condition: { StringEquals: { "ec2:CreateAction": "CreateSecurityGroup" } },
    },
    {
      Sid: "ManageOwnSecurityGroups",
      Effect: "Allow",
      Action: [
        "ec2:CreateTags",
        "ec2:DeleteTags",
        "ec2:AuthorizeSecurityGroupIngress",
        "ec2:RevokeSecurityGroupIngress",
        "ec2:DeleteSecurityGroup",
      ],
      Resource: [pulumi.interpolate`${ec2}:security-group/*`],
      Condition: ownedSecurityGroups,
    },
    {
      Sid: "OpenNodesToLoadBalancers",
      Effect: "Allow",
      Action: ["ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress"],
      Resource: [pulumi.interpolate`${ec2}:security-group/${a.clusterSecurityGroupId}`],
    },
    {
      Sid: "ManageOwnLoadBalancers",
      Effect: "Allow",
      Action: [
        "elasticloadbalancing:CreateLoadBalancer",
        "elasticloadbalancing:CreateTargetGroup",
        "elasticloadbalancing:DeleteLoadBalancer",
        "elasticloadbalancing:DeleteTargetGroup",
        "elasticloadbalancing:ModifyLoadBalancerAttributes",
        "elasticloadbalancing:ModifyTargetGroup",
        "elasticloadbalancing:ModifyTargetGroupAttributes",
        "elasticloadbalancing:SetIpAddressType",
        "elasticloadbalancing:SetSecurityGroups",
        "elasticloadbalancing:SetSubnets",
        "elasticloadbalancing:RegisterTargets",
        "elasticloadbalancing:DeregisterTargets",
        "elasticloadbalancing:CreateListener",
        "elasticloadbalancing:DeleteListener",
        "elasticloadbalancing:ModifyListener",
        "elasticloadbalancing:AddListenerCertificates",
        "elasticloadbalancing:RemoveListenerCertificates",
        "elasticloadbalancing:CreateRule",
        "elasticloadbalancing:DeleteRule",
        "elasticloadbalancing:ModifyRule",
        "elasticloadbalancing:AddTags",
        "elasticloadbalancing:RemoveTags",
      ],
      Resource: [loadBalancers, targetGroups, listeners, rules],
    },
  ];
}

/**
 * Cluster-wide add-ons the chart depends on: the AWS Load Balancer Controller (Ingress -> ALB
 * with TLS), the Secrets Store CSI driver with its AWS provider (Secrets Manager -> pods) and
 * metrics-server (HPA).
 */
export class ClusterAddons extends pulumi.ComponentResource {
  readonly ready: pulumi.Resource[];

  constructor(name: string, args: ClusterAddonsArgs, opts?: pulumi.ComponentResourceOptions) {
    super("cgs:infra:ClusterAddons", name, {}, opts);
    // The controllers' policies are scoped to ARNs in this region.
    matching("aws:region", args.region, /^[a-z]{2}(-[a-z]+)+-\d$/, "an AWS region such as eu-west-1");
    const k8sOpts = { parent: this, provider: args.provider };
    const namespace = "kube-system";
    const lbcServiceAccount = "aws-load-balancer-controller";

    const lbcRole = new ServiceAccountRole(
      `${name}-lbc`,
      {
        roleName: `${args.roleNamePrefix}-aws-load-balancer-controller`,
        namespace,
        serviceAccount: lbcServiceAccount,
        oidcProviderArn: args.oidcProviderArn,
        oidcIssuerUrl: args.oidcIssuerUrl,
        statements: loadBalancerControllerStatements(args),
        tags: args.tags,
      },
      { parent: this },
    );

    const chart = (c: { chart: string; version: string; repo: string }) => ({
      chart: c.chart,
      version: c.version,
      repositoryOpts: { repo: c.repo },
      namespace,
    });

    const lbc = new k8s.helm.v3.Release(
      `${name}-lbc`,
      {
        ...chart(ADDON_CHARTS.loadBalancerController),
        values: {
          clusterName: args.clusterName,
          region: args.region,
          vpcId: args.vpcId,
          replicaCount: 2,
          enableShield: false,
          enableWaf: false,
          enableWafv2: false,
          serviceAccount: {
            create: true,
            name: lbcServiceAccount,
            annotations: { "eks.amazonaws.com/role-arn": lbcRole.roleArn },
          },
        },
      },
      k8sOpts,
    );

    const csi = new k8s.helm.v3.Release(
      `${name}-secrets-store`,
      {
        ...chart(ADDON_CHARTS.secretsStoreCsiDriver),
        values: { syncSecret: { enabled: true }, enableSecretRotation: true, rotationPollInterval: "2m" },
      },
      k8sOpts,
    );
    const csiAws = new k8s.helm.v3.Release(
      `${name}-secrets-store-aws`,
      { ...chart(ADDON_CHARTS.secretsStoreAwsProvider), values: {} },
      { ...k8sOpts, dependsOn: [csi] },
    );

    const metrics = new k8s.helm.v3.Release(
      `${name}-metrics-server`,
      { ...chart(ADDON_CHARTS.metricsServer), values: { replicas: 2 } },
      k8sOpts,
    );

    this.ready = [lbc, csi, csiAws, metrics];
    this.registerOutputs({});
  }
}
