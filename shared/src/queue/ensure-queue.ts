import {
  CreateQueueCommand,
  GetQueueAttributesCommand,
  GetQueueUrlCommand,
  QueueDoesNotExist,
  SetQueueAttributesCommand,
  type SQSClient,
} from "@aws-sdk/client-sqs";

export interface EnsureQueueOptions {
  /** Receives before SQS moves a message to the DLQ. */
  maxReceiveCount: number;
  /** Seconds a received message stays hidden before it can be received again. */
  visibilityTimeout: number;
  messageRetentionSeconds?: number;
}

export interface EnsuredQueue {
  queueUrl: string;
  queueArn: string;
  deadLetterQueueUrl: string;
  deadLetterQueueArn: string;
}

/**
 * Creates (or converges) `name` and `name-dlq` with a RedrivePolicy; for local runs and tests,
 * production queues come from infra.
 */
export async function ensureQueue(
  sqs: SQSClient,
  name: string,
  options: EnsureQueueOptions,
): Promise<EnsuredQueue> {
  const retention = String(options.messageRetentionSeconds ?? 1_209_600);
  const dlq = await ensureOne(sqs, `${name}-dlq`, { MessageRetentionPeriod: retention });
  const main = await ensureOne(sqs, name, {
    VisibilityTimeout: String(options.visibilityTimeout),
    MessageRetentionPeriod: retention,
    RedrivePolicy: JSON.stringify({
      deadLetterTargetArn: dlq.arn,
      maxReceiveCount: options.maxReceiveCount,
    }),
  });
  return { queueUrl: main.url, queueArn: main.arn, deadLetterQueueUrl: dlq.url, deadLetterQueueArn: dlq.arn };
}

async function ensureOne(
  sqs: SQSClient,
  name: string,
  attributes: Record<string, string>,
): Promise<{ url: string; arn: string }> {
  let url: string | undefined;
  try {
    url = (await sqs.send(new GetQueueUrlCommand({ QueueName: name }))).QueueUrl;
  } catch (err) {
    if (!(err instanceof QueueDoesNotExist)) throw err;
  }
  if (url) {
    await sqs.send(new SetQueueAttributesCommand({ QueueUrl: url, Attributes: attributes }));
  } else {
    url = (await sqs.send(new CreateQueueCommand({ QueueName: name, Attributes: attributes }))).QueueUrl;
  }
  if (!url) throw new Error(`SQS returned no URL for queue ${name}`);
  const described = await sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ["QueueArn"] }),
  );
  const arn = described.Attributes?.QueueArn;
  if (!arn) throw new Error(`SQS returned no ARN for queue ${name}`);
  return { url, arn };
}
