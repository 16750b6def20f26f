import { SendMessageCommand, SQSClient } from "@aws-sdk/client-sqs";
import type { ReportSink } from "../agent/host-agent";

/**
 * Reports go to one SQS queue that the sessions service drains in batches: the platform never opens a connection
 * to an instance, and the instance role may send to that queue and nothing else. The SDK's default credential
 * chain finds the instance role through IMDSv2.
 */
export class SqsReportSink implements ReportSink {
  private readonly sqs: SQSClient;

  constructor(
    private readonly queueUrl: string,
    options: { region: string; endpoint?: string; timeoutMs?: number },
  ) {
    this.sqs = new SQSClient({
      region: options.region,
      ...(options.endpoint ? { endpoint: options.endpoint } : {}),
      // One attempt per call: the agent keeps the report and retries with its own back-off.
      maxAttempts: 1,
      requestHandler: {
        requestTimeout: options.timeoutMs ?? 5_000,
        connectionTimeout: options.timeoutMs ?? 5_000,
      },
    });
  }

  async send(body: string): Promise<void> {
    await this.sqs.send(new SendMessageCommand({ QueueUrl: this.queueUrl, MessageBody: body }));
  }

  close(): void {
    this.sqs.destroy();
  }
}
