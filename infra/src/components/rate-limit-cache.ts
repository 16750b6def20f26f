import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import * as random from "@pulumi/random";
import type { RedisConfig } from "../config";
import { integerIn, matching } from "../config-checks";

export interface RateLimitCacheArgs extends RedisConfig {
  name: string;
  vpcId: pulumi.Input<string>;
  subnetIds: pulumi.Input<string>[];
  clientSecurityGroupIds: pulumi.Input<string>[];
  secretPrefix: string;
  tags: Record<string, string>;
}

/** ElastiCache Redis for the gateway's shared rate limits: TLS, AUTH token, failover when >1 node. */
export class RateLimitCache extends pulumi.ComponentResource {
  readonly primaryEndpoint: pulumi.Output<string>;
  /** Secrets Manager entry: {url} with the rediss:// URL including the AUTH token. */
  readonly secretArn: pulumi.Output<string>;

  constructor(name: string, args: RateLimitCacheArgs, opts?: pulumi.ComponentResourceOptions) {
    super("cgs:infra:RateLimitCache", name, {}, opts);
    matching("cgs:redis.engineVersion", args.engineVersion, /^\d+\.\d+$/, 'a Redis version such as "7.1"');
    matching(
      "cgs:redis.nodeType",
      args.nodeType,
      /^cache\.[a-z0-9]+\.[a-z0-9]+$/,
      "a node type such as cache.t4g.small",
    );
    // A replication group holds a primary and at most five replicas.
    integerIn("cgs:redis.nodes", args.nodes, 1, 6);
    integerIn("cgs:redis.snapshotRetentionDays", args.snapshotRetentionDays, 0, 35);
    const parent = { parent: this };
    const sg = new aws.ec2.SecurityGroup(
      `${name}-sg`,
      {
        vpcId: args.vpcId,
        description: "Redis from the cluster nodes only",
        ingress: [
          {
            protocol: "tcp",
            fromPort: 6379,
            toPort: 6379,
            securityGroups: args.clientSecurityGroupIds,
            description: "EKS nodes",
          },
        ],
        tags: { ...args.tags, Name: `${args.name}-redis` },
      },
      parent,
    );
    const subnets = new aws.elasticache.SubnetGroup(
      `${name}-subnets`,
      { name: `${args.name}-redis`, subnetIds: args.subnetIds, tags: args.tags },
      parent,
    );
    const token = new random.RandomPassword(`${name}-auth`, { length: 48, special: false }, parent);
    const failover = args.nodes > 1;
    const group = new aws.elasticache.ReplicationGroup(
      name,
      {
        replicationGroupId: args.name,
        description: "Gateway rate limits",
        engine: "redis",
        engineVersion: args.engineVersion,
        nodeType: args.nodeType,
        numCacheClusters: args.nodes,
        automaticFailoverEnabled: failover,
        multiAzEnabled: failover,
        port: 6379,
        subnetGroupName: subnets.name,
        securityGroupIds: [sg.id],
        atRestEncryptionEnabled: true,
        transitEncryptionEnabled: true,
        authToken: token.result,
        snapshotRetentionLimit: args.snapshotRetentionDays,
        tags: args.tags,
      },
      parent,
    );
    const secret = new aws.secretsmanager.Secret(
      `${name}-url`,
      {
        name: `${args.secretPrefix}/redis`,
        description: "Rate-limit Redis URL with AUTH token",
        recoveryWindowInDays: 7,
        tags: args.tags,
      },
      parent,
    );
    new aws.secretsmanager.SecretVersion(
      `${name}-url`,
      {
        secretId: secret.id,
        secretString: pulumi.jsonStringify({
          url: pulumi.interpolate`rediss://:${token.result}@${group.primaryEndpointAddress}:6379`,
        }),
      },
      parent,
    );
    this.primaryEndpoint = group.primaryEndpointAddress;
    this.secretArn = secret.arn;
    this.registerOutputs({ primaryEndpoint: this.primaryEndpoint });
  }
}
