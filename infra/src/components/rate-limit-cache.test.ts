import type { RedisConfig } from "../config";
import { mockResources, settled, stagingValue } from "../testing/component-harness";
import type { RecordedResource } from "../testing/stack-harness";
import { RateLimitCache } from "./rate-limit-cache";

let resources: RecordedResource[];
beforeAll(async () => {
  resources = await mockResources();
});

let built = 0;
function cache(change: (c: RedisConfig) => void = () => {}) {
  const config = stagingValue<RedisConfig>("redis");
  change(config);
  return new RateLimitCache(`cache-${++built}`, {
    ...config,
    name: "cgs-test",
    vpcId: "vpc-1",
    subnetIds: ["subnet-a"],
    clientSecurityGroupIds: ["sg-nodes"],
    secretPrefix: "cgs-test",
    tags: {},
  });
}
const group = () =>
  resources.find(
    (r) => r.type === "aws:elasticache/replicationGroup:ReplicationGroup" && r.name === `cache-${built}`,
  );

describe("RateLimitCache", () => {
  it("when one node is configured, then there is no failover; with two, failover spans zones", async () => {
    cache();
    await settled();
    expect(group()?.inputs).toMatchObject({
      numCacheClusters: 1,
      automaticFailoverEnabled: false,
      transitEncryptionEnabled: true,
    });
    cache((c) => (c.nodes = 2));
    await settled();
    expect(group()?.inputs).toMatchObject({
      numCacheClusters: 2,
      automaticFailoverEnabled: true,
      multiAzEnabled: true,
    });
  });

  it.each([
    [
      "a major version alone",
      (c: RedisConfig) => (c.engineVersion = "7"),
      /cgs:redis.engineVersion must be a Redis version such as "7.1" \(got "7"\)/,
    ],
    [
      "a node type without the cache. prefix",
      (c: RedisConfig) => (c.nodeType = "t4g.small"),
      /cgs:redis.nodeType must be a node type such as cache.t4g.small/,
    ],
    [
      "no node",
      (c: RedisConfig) => (c.nodes = 0),
      /cgs:redis.nodes must be an integer from 1 to 6 \(got 0\)/,
    ],
    [
      "more nodes than a replication group holds",
      (c: RedisConfig) => (c.nodes = 7),
      /cgs:redis.nodes must be an integer from 1 to 6 \(got 7\)/,
    ],
    [
      "snapshots kept longer than ElastiCache allows",
      (c: RedisConfig) => (c.snapshotRetentionDays = 36),
      /cgs:redis.snapshotRetentionDays must be an integer from 0 to 35/,
    ],
  ])("when the config has %s, then the cache is refused", (_what, change, message) => {
    expect(() => cache(change)).toThrow(message);
  });
});
