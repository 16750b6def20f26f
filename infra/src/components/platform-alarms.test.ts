import { mockResources, settled } from "../testing/component-harness";
import type { RecordedResource } from "../testing/stack-harness";
import { defaultMaxConnections, PlatformAlarms, type PlatformAlarmsArgs } from "./platform-alarms";

let resources: RecordedResource[];
beforeAll(async () => {
  resources = await mockResources();
});

let built = 0;
const alarms = (change: Partial<PlatformAlarmsArgs> = {}) =>
  new PlatformAlarms(`alarms-${++built}`, {
    prefix: "cgs-test",
    queues: { billing: { queueName: "test-cgs-billing", dlqName: "test-cgs-billing-dlq" } },
    database: { identifier: "cgs-test", instanceClass: "db.t4g.medium", allocatedStorageGiB: 20 },
    cache: { replicationGroupId: "cgs-test", nodes: 2 },
    tags: {},
    ...change,
  });

describe("PlatformAlarms", () => {
  it("when Redis has two nodes, then each node's memory is watched, and connections alarm at 80 % of the class's default", async () => {
    alarms();
    await settled();
    const names = resources
      .filter(
        (r) => r.type === "aws:cloudwatch/metricAlarm:MetricAlarm" && r.name.startsWith(`alarms-${built}-`),
      )
      .map((r) => r.inputs.name);
    expect(names).toEqual(expect.arrayContaining(["cgs-test-redis-memory-001", "cgs-test-redis-memory-002"]));
    const connections = resources.find((r) => r.name === `alarms-${built}-rds-connections`);
    expect(connections?.inputs.threshold).toBe(Math.floor(defaultMaxConnections("db.t4g.medium") * 0.8));
    expect(defaultMaxConnections("db.t4g.medium")).toBe(450);
  });

  it.each([
    [
      "an instance size the connection alarm cannot size",
      { database: { identifier: "x", instanceClass: "db.t4g.huge", allocatedStorageGiB: 20 } },
      /cgs:database.instanceClass db.t4g.huge has a size the connection alarm does not know/,
    ],
    [
      "a cache without nodes",
      { cache: { replicationGroupId: "x", nodes: 0 } },
      /cgs:redis.nodes must be an integer from 1 to 6 \(got 0\)/,
    ],
    [
      "storage too small to alarm on",
      { database: { identifier: "x", instanceClass: "db.t4g.medium", allocatedStorageGiB: 0 } },
      /cgs:database.allocatedStorageGiB must be an integer of at least 20/,
    ],
  ])("when given %s, then the alarms are refused", (_what, change, message) => {
    expect(() => alarms(change)).toThrow(message);
  });
});
