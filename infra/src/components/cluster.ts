import * as aws from "@pulumi/aws";
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import type { NodeGroupConfig } from "../config";
import { DNS_LABEL, fail, integerIn, matching, nonEmptyList, oneOf, unique } from "../config-checks";
import { servicePrincipalTrustPolicy } from "../iam-policy";

export interface ClusterArgs {
  name: string;
  region: string;
  kubernetesVersion: string;
  vpcId: pulumi.Input<string>;
  privateSubnetIds: pulumi.Input<string>[];
  publicSubnetIds: pulumi.Input<string>[];
  nodeGroups: NodeGroupConfig[];
  tags: Record<string, string>;
}

const NODE_POLICIES = [
  "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
  "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
  "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
];

function validateCluster(args: ClusterArgs): void {
  matching(
    "cgs:kubernetesVersion",
    args.kubernetesVersion,
    /^1\.\d{2}$/,
    'an EKS minor version such as "1.35"',
  );
  nonEmptyList("cgs:nodeGroups", args.nodeGroups);
  unique(
    "cgs:nodeGroups[].name",
    args.nodeGroups.map((g) => g.name),
  );
  for (const g of args.nodeGroups) {
    const key = `cgs:nodeGroups[${JSON.stringify(g.name)}]`;
    matching(`${key}.name`, g.name, DNS_LABEL, "a lowercase DNS label");
    for (const t of nonEmptyList<string>(`${key}.instanceTypes`, g.instanceTypes)) {
      matching(
        `${key}.instanceTypes`,
        t,
        /^[a-z][a-z0-9-]*\.[a-z0-9]+$/,
        "EC2 instance types such as t3.large",
      );
    }
    oneOf(`${key}.capacityType`, g.capacityType, ["ON_DEMAND", "SPOT"] as const);
    integerIn(`${key}.minSize`, g.minSize, 0);
    integerIn(`${key}.maxSize`, g.maxSize, 1);
    integerIn(`${key}.desiredSize`, g.desiredSize, g.minSize, g.maxSize);
    // EKS-optimized AMIs need 20 GiB for the OS and images.
    integerIn(`${key}.diskSizeGiB`, g.diskSizeGiB, 20, 16_384);
  }
  if (args.nodeGroups.every((g) => g.maxSize === 0))
    fail("cgs:nodeGroups can never run a node (every maxSize is 0)");
}

/**
 * EKS control plane, managed node groups in the private subnets, the IAM OIDC provider for
 * service-account roles, the core add-ons (VPC CNI with NetworkPolicy enforcement) and a
 * Kubernetes provider for everything deployed into the cluster.
 */
export class Cluster extends pulumi.ComponentResource {
  readonly clusterName: pulumi.Output<string>;
  readonly endpoint: pulumi.Output<string>;
  readonly clusterSecurityGroupId: pulumi.Output<string>;
  readonly oidcProviderArn: pulumi.Output<string>;
  readonly oidcIssuerUrl: pulumi.Output<string>;
  readonly kubeconfig: pulumi.Output<string>;
  readonly provider: k8s.Provider;

  constructor(name: string, args: ClusterArgs, opts?: pulumi.ComponentResourceOptions) {
    super("cgs:infra:Cluster", name, {}, opts);
    validateCluster(args);
    const parent = { parent: this };

    const clusterRole = new aws.iam.Role(
      `${name}-control-plane`,
      { assumeRolePolicy: servicePrincipalTrustPolicy("eks.amazonaws.com"), tags: args.tags },
      parent,
    );
    const clusterPolicy = new aws.iam.RolePolicyAttachment(
      `${name}-control-plane`,
      { role: clusterRole.name, policyArn: "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy" },
      parent,
    );

    const secretsKey = new aws.kms.Key(
      `${name}-secrets`,
      {
        description: `${args.name} Kubernetes secrets envelope encryption`,
        enableKeyRotation: true,
        tags: args.tags,
      },
      parent,
    );

    const cluster = new aws.eks.Cluster(
      name,
      {
        name: args.name,
        version: args.kubernetesVersion,
        roleArn: clusterRole.arn,
        vpcConfig: {
          subnetIds: [...args.privateSubnetIds, ...args.publicSubnetIds],
          endpointPrivateAccess: true,
          endpointPublicAccess: true,
        },
        accessConfig: { authenticationMode: "API", bootstrapClusterCreatorAdminPermissions: true },
        encryptionConfig: { provider: { keyArn: secretsKey.arn }, resources: ["secrets"] },
        enabledClusterLogTypes: ["api", "audit", "authenticator"],
        tags: args.tags,
      },
      { parent: this, dependsOn: [clusterPolicy] },
    );

    const oidc = new aws.iam.OpenIdConnectProvider(
      `${name}-oidc`,
      {
        url: cluster.identities.apply((ids) => ids[0]?.oidcs?.[0]?.issuer ?? ""),
        clientIdLists: ["sts.amazonaws.com"],
        tags: args.tags,
      },
      parent,
    );

    // VPC CNI enforces NetworkPolicy only when asked to; the chart relies on it.
    const vpcCni = new aws.eks.Addon(
      `${name}-vpc-cni`,
      {
        clusterName: cluster.name,
        addonName: "vpc-cni",
        resolveConflictsOnCreate: "OVERWRITE",
        resolveConflictsOnUpdate: "OVERWRITE",
        configurationValues: JSON.stringify({ enableNetworkPolicy: "true" }),
        tags: args.tags,
      },
      parent,
    );

    const nodeRole = new aws.iam.Role(
      `${name}-nodes`,
      { assumeRolePolicy: servicePrincipalTrustPolicy("ec2.amazonaws.com"), tags: args.tags },
      parent,
    );
    const nodePolicies = NODE_POLICIES.map(
      (policyArn, i) =>
        new aws.iam.RolePolicyAttachment(`${name}-nodes-${i}`, { role: nodeRole.name, policyArn }, parent),
    );

    const nodeGroups = args.nodeGroups.map(
      (g) =>
        new aws.eks.NodeGroup(
          `${name}-${g.name}`,
          {
            clusterName: cluster.name,
            nodeGroupNamePrefix: `${g.name}-`,
            nodeRoleArn: nodeRole.arn,
            subnetIds: args.privateSubnetIds,
            instanceTypes: g.instanceTypes,
            capacityType: g.capacityType,
            diskSize: g.diskSizeGiB,
            scalingConfig: { minSize: g.minSize, desiredSize: g.desiredSize, maxSize: g.maxSize },
            updateConfig: { maxUnavailable: 1 },
            labels: { "cgs.io/node-group": g.name },
            tags: args.tags,
          },
          {
            parent: this,
            dependsOn: [...nodePolicies, vpcCni],
            // The cluster autoscaler (or an operator) moves desiredSize; do not fight it.
            ignoreChanges: ["scalingConfig.desiredSize"],
          },
        ),
    );

    for (const addonName of ["coredns", "kube-proxy"]) {
      new aws.eks.Addon(
        `${name}-${addonName}`,
        {
          clusterName: cluster.name,
          addonName,
          resolveConflictsOnCreate: "OVERWRITE",
          resolveConflictsOnUpdate: "OVERWRITE",
          tags: args.tags,
        },
        { parent: this, dependsOn: nodeGroups },
      );
    }

    this.kubeconfig = pulumi
      .all([cluster.name, cluster.endpoint, cluster.certificateAuthority])
      .apply(([clusterName, endpoint, ca]) =>
        JSON.stringify({
          apiVersion: "v1",
          kind: "Config",
          clusters: [
            { name: clusterName, cluster: { server: endpoint, "certificate-authority-data": ca.data } },
          ],
          contexts: [{ name: clusterName, context: { cluster: clusterName, user: clusterName } }],
          "current-context": clusterName,
          users: [
            {
              name: clusterName,
              user: {
                exec: {
                  apiVersion: "client.authentication.k8s.io/v1beta1",
                  command: "aws",
                  args: ["eks", "get-token", "--cluster-name", clusterName, "--region", args.region],
                },
              },
            },
          ],
        }),
      );

    this.provider = new k8s.Provider(
      `${name}-k8s`,
      { kubeconfig: this.kubeconfig, enableServerSideApply: true },
      { parent: this, dependsOn: nodeGroups },
    );

    this.clusterName = cluster.name;
    this.endpoint = cluster.endpoint;
    this.clusterSecurityGroupId = cluster.vpcConfig.apply((v) => v.clusterSecurityGroupId);
    this.oidcProviderArn = oidc.arn;
    this.oidcIssuerUrl = oidc.url.apply((u) => (u.startsWith("https://") ? u : `https://${u}`));
    this.registerOutputs({
      clusterName: this.clusterName,
      endpoint: this.endpoint,
      oidcProviderArn: this.oidcProviderArn,
    });
  }
}
