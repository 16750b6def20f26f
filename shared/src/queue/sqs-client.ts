import { SQSClient } from "@aws-sdk/client-sqs";

export interface SqsClientOptions {
  region: string;
  /** Endpoint override, e.g. moto at http://127.0.0.1:5000; unset in production. */
  endpoint?: string;
  /** Static credentials for local peers; unset in production (the default provider chain applies). */
  credentials?: { accessKeyId: string; secretAccessKey: string };
}

export function createSqsClient(options: SqsClientOptions): SQSClient {
  return new SQSClient({
    region: options.region,
    ...(options.endpoint ? { endpoint: options.endpoint } : {}),
    ...(options.credentials ? { credentials: options.credentials } : {}),
  });
}
