import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import type { QueueConfig } from "../config";
import { integerIn, matching } from "../config-checks";

export interface ServiceQueueArgs extends QueueConfig {
  queueName: string;
  tags: Record<string, string>;
}

/** A service's inbound SQS queue; messages received too often move to its dead-letter queue. */
export class ServiceQueue extends pulumi.ComponentResource {
  readonly arn: pulumi.Output<string>;
  readonly url: pulumi.Output<string>;
  readonly dlqArn: pulumi.Output<string>;
  readonly dlqUrl: pulumi.Output<string>;

  constructor(name: string, args: ServiceQueueArgs, opts?: pulumi.ComponentResourceOptions) {
    super("cgs:infra:ServiceQueue", name, {}, opts);
    // SQS limits: names of 80 characters (the DLQ adds 4), 1-1000 receives, 12 h visibility, 14 days retention.
    matching("queue name", args.queueName, /^[A-Za-z0-9_-]{1,76}$/, "letters, digits, - and _ (at most 76)");
    integerIn("cgs:queues.maxReceiveCount", args.maxReceiveCount, 1, 1000);
    integerIn("cgs:queues.visibilityTimeoutSeconds", args.visibilityTimeoutSeconds, 0, 43_200);
    integerIn("cgs:queues.retentionDays", args.retentionDays, 1, 14);
    // A standard queue's message keeps its first enqueue time in the DLQ: a shorter DLQ retention loses it at once.
    integerIn("cgs:queues.dlqRetentionDays", args.dlqRetentionDays, args.retentionDays, 14);
    const day = 24 * 60 * 60;
    const dlq = new aws.sqs.Queue(
      `${name}-dlq`,
      {
        name: `${args.queueName}-dlq`,
        messageRetentionSeconds: args.dlqRetentionDays * day,
        sqsManagedSseEnabled: true,
        tags: args.tags,
      },
      { parent: this },
    );
    const queue = new aws.sqs.Queue(
      name,
      {
        name: args.queueName,
        visibilityTimeoutSeconds: args.visibilityTimeoutSeconds,
        messageRetentionSeconds: args.retentionDays * day,
        receiveWaitTimeSeconds: 20,
        sqsManagedSseEnabled: true,
        redrivePolicy: pulumi.jsonStringify({
          deadLetterTargetArn: dlq.arn,
          maxReceiveCount: args.maxReceiveCount,
        }),
        tags: args.tags,
      },
      { parent: this },
    );
    // Only this queue may move messages into the DLQ.
    new aws.sqs.RedriveAllowPolicy(
      `${name}-dlq`,
      {
        queueUrl: dlq.url,
        redriveAllowPolicy: pulumi.jsonStringify({
          redrivePermission: "byQueue",
          sourceQueueArns: [queue.arn],
        }),
      },
      { parent: this },
    );
    this.arn = queue.arn;
    this.url = queue.url;
    this.dlqArn = dlq.arn;
    this.dlqUrl = dlq.url;
    this.registerOutputs({ arn: this.arn, url: this.url, dlqArn: this.dlqArn });
  }
}
