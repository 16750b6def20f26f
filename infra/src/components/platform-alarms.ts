import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { fail, integerIn } from "../config-checks";

export interface PlatformAlarmsArgs {
  prefix: string;
  /** Inbound queue name and its DLQ name per consuming service. */
  queues: Record<string, { queueName: pulumi.Input<string>; dlqName: pulumi.Input<string> }>;
  database: { identifier: pulumi.Input<string>; instanceClass: string; allocatedStorageGiB: number };
  cache: { replicationGroupId: string; nodes: number };
  tags: Record<string, string>;
}

const GiB = 1024 ** 3;
/** Memory of an RDS instance size; RDS PostgreSQL's default max_connections is memory / 9531392 bytes. */
const MEMORY_GIB_BY_SIZE: Record<string, number> = {
  micro: 1,
  small: 2,
  medium: 4,
  large: 8,
  xlarge: 16,
  "2xlarge": 32,
  "4xlarge": 64,
  "8xlarge": 128,
};

export function defaultMaxConnections(instanceClass: string): number {
  const size = instanceClass.split(".").pop() ?? "";
  const memoryGiB = MEMORY_GIB_BY_SIZE[size];
  if (!memoryGiB) {
    fail(
      `cgs:database.instanceClass ${instanceClass} has a size the connection alarm does not know (${Object.keys(MEMORY_GIB_BY_SIZE).join(", ")})`,
    );
  }
  return Math.min(5000, Math.floor((memoryGiB * GiB) / 9_531_392));
}

/**
 * CloudWatch alarms for what the platform's Prometheus cannot see from inside the cluster: messages in a
 * DLQ and how long they have waited, inbound queues backing up, RDS storage and connections, ElastiCache
 * memory. Every alarm notifies one SNS topic (subscribe the on-call tool to it); the README has a
 * runbook paragraph per alarm.
 */
export class PlatformAlarms extends pulumi.ComponentResource {
  readonly topicArn: pulumi.Output<string>;
  readonly alarmNames: pulumi.Output<string>[] = [];

  constructor(name: string, args: PlatformAlarmsArgs, opts?: pulumi.ComponentResourceOptions) {
    super("cgs:infra:PlatformAlarms", name, {}, opts);
    integerIn("cgs:redis.nodes", args.cache.nodes, 1, 6);
    integerIn("cgs:database.allocatedStorageGiB", args.database.allocatedStorageGiB, 20);
    defaultMaxConnections(args.database.instanceClass);
    const parent = { parent: this };
    const topic = new aws.sns.Topic(
      `${name}-topic`,
      { name: `${args.prefix}-alarms`, tags: args.tags },
      parent,
    );
    const actions = [topic.arn];
    const alarm = (
      id: string,
      alarmArgs: Omit<aws.cloudwatch.MetricAlarmArgs, "alarmActions" | "okActions">,
    ) => {
      const created = new aws.cloudwatch.MetricAlarm(
        `${name}-${id}`,
        {
          name: `${args.prefix}-${id}`,
          alarmActions: actions,
          okActions: actions,
          treatMissingData: "notBreaching",
          tags: args.tags,
          ...alarmArgs,
        },
        parent,
      );
      this.alarmNames.push(created.name);
    };

    for (const [service, queue] of Object.entries(args.queues)) {
      alarm(`${service}-dlq-depth`, {
        alarmDescription: `Messages in the ${service} DLQ: events the service could not handle. Runbook: docs/operations.md#cgsdeadletterqueuenotempty.`,
        namespace: "AWS/SQS",
        metricName: "ApproximateNumberOfMessagesVisible",
        dimensions: { QueueName: queue.dlqName },
        statistic: "Maximum",
        period: 60,
        evaluationPeriods: 1,
        threshold: 0,
        comparisonOperator: "GreaterThanThreshold",
      });
      alarm(`${service}-dlq-oldest-age`, {
        alarmDescription: `A message has waited over an hour in the ${service} DLQ with nobody redriving it.`,
        namespace: "AWS/SQS",
        metricName: "ApproximateAgeOfOldestMessage",
        dimensions: { QueueName: queue.dlqName },
        statistic: "Maximum",
        period: 300,
        evaluationPeriods: 1,
        threshold: 3600,
        comparisonOperator: "GreaterThanThreshold",
      });
      alarm(`${service}-queue-oldest-age`, {
        alarmDescription: `The ${service} consumer is behind: its oldest inbound message is over 10 minutes old.`,
        namespace: "AWS/SQS",
        metricName: "ApproximateAgeOfOldestMessage",
        dimensions: { QueueName: queue.queueName },
        statistic: "Maximum",
        period: 60,
        evaluationPeriods: 5,
        threshold: 600,
        comparisonOperator: "GreaterThanThreshold",
      });
    }

    const db = { DBInstanceIdentifier: args.database.identifier };
    alarm("rds-free-storage", {
      alarmDescription:
        "RDS free storage below 20 % of the allocated size (storage autoscaling may be capped).",
      namespace: "AWS/RDS",
      metricName: "FreeStorageSpace",
      dimensions: db,
      statistic: "Minimum",
      period: 300,
      evaluationPeriods: 2,
      threshold: Math.round(args.database.allocatedStorageGiB * GiB * 0.2),
      comparisonOperator: "LessThanThreshold",
    });
    alarm("rds-connections", {
      alarmDescription: "RDS connections above 80 % of max_connections: pools are growing or leaking.",
      namespace: "AWS/RDS",
      metricName: "DatabaseConnections",
      dimensions: db,
      statistic: "Maximum",
      period: 60,
      evaluationPeriods: 5,
      threshold: Math.floor(defaultMaxConnections(args.database.instanceClass) * 0.8),
      comparisonOperator: "GreaterThanThreshold",
    });

    for (let i = 1; i <= args.cache.nodes; i += 1) {
      const member = `${args.cache.replicationGroupId}-${String(i).padStart(3, "0")}`;
      alarm(`redis-memory-${String(i).padStart(3, "0")}`, {
        alarmDescription: `ElastiCache node ${member} above 80 % of its memory: rate-limit keys will be evicted.`,
        namespace: "AWS/ElastiCache",
        metricName: "DatabaseMemoryUsagePercentage",
        dimensions: { CacheClusterId: member },
        statistic: "Maximum",
        period: 300,
        evaluationPeriods: 2,
        threshold: 80,
        comparisonOperator: "GreaterThanThreshold",
      });
    }

    this.topicArn = topic.arn;
    this.registerOutputs({ topicArn: this.topicArn });
  }
}
