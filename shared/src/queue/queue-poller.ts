import {
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
  type Message,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import { silentLogger, type ComponentLogger } from "../db/component-logger";

export interface QueuePollerOptions {
  sqs: SQSClient;
  queueUrl: string;
  /** Long polling; 20 s is the SQS maximum. */
  waitTimeSeconds?: number;
  /** 1–10 messages per receive. */
  maxMessages?: number;
  /** Overrides the queue's visibility timeout for messages this poller receives (seconds). */
  visibilityTimeout?: number;
  /** Pause after a failed receive (network, throttling) before polling again. */
  receiveErrorBackoffMs?: number;
  /** Receive loops running at once (each long-polls on its own). */
  concurrency?: number;
  logger?: ComponentLogger;
  /** One received batch; the handler deletes what it is done with. A rejection is logged, the loop goes on. */
  handleBatch(messages: Message[]): Promise<void>;
}

export interface QueuePoller {
  /** Stops polling and resolves once the batches in hand are finished. */
  stop(): Promise<void>;
}

/** The receive loop every consumer of the platform's queues runs: long polls, backs off on errors, stops cleanly. */
export function startQueuePoller(options: QueuePollerOptions): QueuePoller {
  const logger = options.logger ?? silentLogger;
  const { sqs, queueUrl } = options;
  const queueName = queueUrl.split("/").pop() ?? queueUrl;
  const abort = new AbortController();
  let stopping = false;

  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        abort.signal.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      abort.signal.addEventListener("abort", done, { once: true });
    });

  const receive = async (): Promise<Message[]> => {
    const out = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        WaitTimeSeconds: options.waitTimeSeconds ?? 20,
        MaxNumberOfMessages: options.maxMessages ?? 10,
        ...(options.visibilityTimeout !== undefined ? { VisibilityTimeout: options.visibilityTimeout } : {}),
        MessageAttributeNames: ["All"],
        MessageSystemAttributeNames: ["ApproximateReceiveCount"],
      }),
      { abortSignal: abort.signal },
    );
    return out.Messages ?? [];
  };

  const loop = async () => {
    while (!stopping) {
      let messages: Message[];
      try {
        messages = await receive();
      } catch (err) {
        if (stopping) break;
        logger.error({ err, queue: queueName }, "receive failed; retrying");
        await pause(options.receiveErrorBackoffMs ?? 1_000);
        continue;
      }
      if (messages.length === 0) continue;
      try {
        await options.handleBatch(messages);
      } catch (err) {
        logger.error(
          { err, queue: queueName },
          "handling a batch failed; its messages come back after the visibility timeout",
        );
      }
    }
  };
  const loops = Array.from({ length: Math.max(1, options.concurrency ?? 1) }, loop);

  return {
    async stop() {
      stopping = true;
      abort.abort();
      await Promise.all(loops);
    },
  };
}

/** Deletes handled messages, ten per call; a failed delete only means SQS delivers the message again. */
export async function deleteMessages(
  sqs: SQSClient,
  queueUrl: string,
  messages: readonly Message[],
  logger: ComponentLogger = silentLogger,
): Promise<void> {
  for (let i = 0; i < messages.length; i += 10) {
    const batch = messages.slice(i, i + 10);
    try {
      const out = await sqs.send(
        new DeleteMessageBatchCommand({
          QueueUrl: queueUrl,
          Entries: batch.map((m, n) => ({ Id: String(n), ReceiptHandle: m.ReceiptHandle })),
        }),
      );
      if (out.Failed && out.Failed.length > 0)
        logger.warn({ failed: out.Failed.length }, "some deletes failed");
    } catch (err) {
      logger.warn({ err, count: batch.length }, "could not delete handled messages");
    }
  }
}
