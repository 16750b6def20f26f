import { randomBytes } from "node:crypto";
import {
  DeleteMessageCommand,
  DeleteQueueCommand,
  ReceiveMessageCommand,
  type Message,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import { ensureQueue, type EnsuredQueue } from "../queue/ensure-queue";
import { createSqsClient } from "../queue/sqs-client";

export const DEFAULT_TEST_SQS_ENDPOINT = "http://127.0.0.1:5000";

/** SQS client for moto: SQS_ENDPOINT (default 127.0.0.1:5000), AWS_REGION (default us-east-1), dummy keys. */
export function createTestSqsClient(): SQSClient {
  return createSqsClient({
    region: process.env.AWS_REGION || "us-east-1",
    endpoint: process.env.SQS_ENDPOINT || DEFAULT_TEST_SQS_ENDPOINT,
    credentials: {
      accessKeyId: process.env.AWS_ACCESS_KEY_ID || "test",
      secretAccessKey: process.env.AWS_SECRET_ACCESS_KEY || "test",
    },
  });
}

export function uniqueQueueName(prefix: string): string {
  return `${prefix.replace(/[^A-Za-z0-9_-]/g, "-").slice(0, 40)}-${randomBytes(5).toString("hex")}`;
}

export interface TestQueue extends EnsuredQueue {
  name: string;
  /** Deletes the queue and its DLQ. */
  remove(): Promise<void>;
}

/** A uniquely named queue + DLQ on moto, so tests never share (or reset) another test's state. */
export async function createTestQueue(
  sqs: SQSClient,
  prefix: string,
  options: { maxReceiveCount?: number; visibilityTimeout?: number } = {},
): Promise<TestQueue> {
  const name = uniqueQueueName(prefix);
  const ensured = await ensureQueue(sqs, name, {
    maxReceiveCount: options.maxReceiveCount ?? 3,
    visibilityTimeout: options.visibilityTimeout ?? 30,
  });
  return {
    ...ensured,
    name,
    remove: async () => {
      await sqs.send(new DeleteQueueCommand({ QueueUrl: ensured.queueUrl })).catch(() => undefined);
      await sqs.send(new DeleteQueueCommand({ QueueUrl: ensured.deadLetterQueueUrl })).catch(() => undefined);
    },
  };
}

/** Receives until the queue answers empty; deletes what it read unless `keep` is set. */
export async function drainQueue(
  sqs: SQSClient,
  queueUrl: string,
  options: { waitTimeSeconds?: number; keep?: boolean } = {},
): Promise<Message[]> {
  const all: Message[] = [];
  for (;;) {
    const out = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: options.waitTimeSeconds ?? 1,
        MessageAttributeNames: ["All"],
        MessageSystemAttributeNames: ["ApproximateReceiveCount"],
      }),
    );
    const messages = out.Messages ?? [];
    if (messages.length === 0) return all;
    all.push(...messages);
    if (!options.keep) {
      for (const m of messages) {
        await sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: m.ReceiptHandle }));
      }
    }
  }
}

/** Polls `probe` until it returns a truthy value or the timeout passes. */
export async function waitUntil<T>(
  probe: () => Promise<T> | T,
  options: { timeoutMs?: number; intervalMs?: number; description?: string } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + (options.timeoutMs ?? 10_000);
  for (;;) {
    const value = await probe();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${options.description ?? "condition"}`);
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 100));
  }
}
