import { runStack, ofType, type RecordedResource, type StackRun } from "./testing/stack-harness";

interface AlarmInputs {
  name: string;
  namespace: string;
  metricName: string;
  dimensions: Record<string, string>;
  threshold: number;
  comparisonOperator: string;
  alarmActions: string[];
}

const alarms = (run: StackRun) =>
  ofType(run, "aws:cloudwatch/metricAlarm:MetricAlarm").map((a) => a.inputs as unknown as AlarmInputs);
const find = (run: StackRun, metricName: string, dimension: string, value: string) =>
  alarms(run).find((a) => a.metricName === metricName && a.dimensions[dimension] === value);
const str = (r: RecordedResource | undefined, key: string) => String(r?.inputs[key] ?? "");

// The program runs once per test file; prod has the most to watch (a Redis replica, Multi-AZ).
describe("stack prod: CloudWatch alarms for what Prometheus cannot see", () => {
  let run: StackRun;
  beforeAll(async () => {
    run = await runStack("prod");
  }, 120_000);

  it("when a message lands in any DLQ, then an alarm on its depth (above 0) and on its oldest message's age fires", () => {
    const dlqs = ofType(run, "aws:sqs/queue:Queue").filter((q) => str(q, "name").endsWith("-dlq"));
    expect(dlqs.length).toBeGreaterThanOrEqual(2);
    for (const dlq of dlqs) {
      const depth = find(run, "ApproximateNumberOfMessagesVisible", "QueueName", str(dlq, "name"));
      expect(depth).toMatchObject({
        namespace: "AWS/SQS",
        threshold: 0,
        comparisonOperator: "GreaterThanThreshold",
      });
      const age = find(run, "ApproximateAgeOfOldestMessage", "QueueName", str(dlq, "name"));
      expect(age).toMatchObject({ namespace: "AWS/SQS", comparisonOperator: "GreaterThanThreshold" });
    }
  });

  it("when an inbound queue backs up, then an alarm on the age of its oldest message fires", () => {
    const inbound = ofType(run, "aws:sqs/queue:Queue").filter((q) => !str(q, "name").endsWith("-dlq"));
    for (const queue of inbound) {
      expect(find(run, "ApproximateAgeOfOldestMessage", "QueueName", str(queue, "name"))?.threshold).toBe(
        600,
      );
    }
  });

  it("when the database runs low on storage or nears max_connections, then an alarm on that instance fires", () => {
    const [db] = ofType(run, "aws:rds/instance:Instance");
    const id = str(db, "identifier");
    const storage = find(run, "FreeStorageSpace", "DBInstanceIdentifier", id);
    expect(storage).toMatchObject({ namespace: "AWS/RDS", comparisonOperator: "LessThanThreshold" });
    expect(storage?.threshold).toBe(Math.round(Number(db?.inputs.allocatedStorage) * 1024 ** 3 * 0.2));
    const connections = find(run, "DatabaseConnections", "DBInstanceIdentifier", id);
    expect(connections).toMatchObject({ namespace: "AWS/RDS", comparisonOperator: "GreaterThanThreshold" });
    expect(connections?.threshold).toBeGreaterThan(0);
  });

  it("when any Redis node's memory passes 80 %, then an alarm on that node fires", () => {
    const [group] = ofType(run, "aws:elasticache/replicationGroup:ReplicationGroup");
    const nodes = Number(group?.inputs.numCacheClusters);
    const memory = alarms(run).filter((a) => a.metricName === "DatabaseMemoryUsagePercentage");
    expect(memory).toHaveLength(nodes);
    for (const a of memory) {
      expect(a.dimensions.CacheClusterId).toMatch(new RegExp(`^${str(group, "replicationGroupId")}-00\\d$`));
      expect(a).toMatchObject({ namespace: "AWS/ElastiCache", threshold: 80 });
    }
  });

  it("when any alarm changes state, then it notifies the platform's alarm topic", () => {
    const [topic] = ofType(run, "aws:sns/topic:Topic");
    expect(topic).toBeDefined();
    for (const a of alarms(run)) expect(a.alarmActions).toHaveLength(1);
    expect(new Set(alarms(run).flatMap((a) => a.alarmActions)).size).toBe(1);
    expect(run.outputs.alarmTopicArn).toBe(alarms(run)[0]?.alarmActions[0]);
  });
});
