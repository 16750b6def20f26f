import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import type { QueueConfig } from "../config";

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
