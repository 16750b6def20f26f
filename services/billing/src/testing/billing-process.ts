import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import path from "node:path";
import { DeleteQueueCommand, type SQSClient } from "@aws-sdk/client-sqs";
import pino from "pino";
import {
  createQueueUrlResolver,
  ensureQueue,
  serviceQueueNames,
  type QueueUrlResolver,
  createOutboxPublisher,
  systemClock,
} from "@cgs/shared";
import { createTestSqsClient } from "@cgs/shared/testing/queue";
import { billingSettings, type BillingDeps } from "../domain/billing-deps";
import { billingTestConfig, openBillingTestDatabase, type BillingDatabaseFixture } from "./billing-harness";

const serviceDir = path.join(__dirname, "..", "..");
const mainJs = path.join(serviceDir, "dist", "main.js");

/** The compiled billing service (dist/main.js) as a child process, to be SIGKILLed and started again. */
export interface BillingProcess {
  start(): ChildProcess;
  /** SIGKILL: no drain, no goodbye; resolves once the process has exited. */
  kill(): Promise<void>;
  /** Everything the process wrote, for a failing test's message. */
  output(): string;
}

export interface BillingProcessOptions {
  databaseUrl: string;
  queuePrefix: string;
  minuteMs: number;
  /** Further variables (they win over the defaults). */
  env?: Record<string, string>;
}

export function billingProcess(options: BillingProcessOptions): BillingProcess {
  if (!existsSync(mainJs)) throw new Error(`${mainJs} is missing: run \`npx tsc -b services/billing\` first`);
  let output = "";
  let child: ChildProcess | undefined;
  const env = {
    PATH: process.env.PATH ?? "",
    NODE_ENV: "test",
    LOG_LEVEL: "warn",
    PORT: "0",
    // Any free port: the default (PORT + 1000) is one fixed port, so two billing processes of parallel tests collided.
    METRICS_PORT: "0",
    DATABASE_URL: options.databaseUrl,
    AWS_REGION: process.env.AWS_REGION || "us-east-1",
    AWS_ENDPOINT_URL: process.env.SQS_ENDPOINT || process.env.AWS_ENDPOINT_URL || "http://127.0.0.1:5000",
    AWS_ACCESS_KEY_ID: "test",
    AWS_SECRET_ACCESS_KEY: "test",
    QUEUE_NAME_PREFIX: options.queuePrefix,
    CREATE_QUEUES: "true",
    QUEUE_WAIT_SECONDS: "1",
    OUTBOX_RELAY_INTERVAL_MS: "100",
    METERING_INTERVAL_MS: "50",
    METERING_MINUTE_MS: String(options.minuteMs),
    PAYMENT_PROVIDER: "local",
    STORAGE_DEFAULT_TIER: "none",
    SHUTDOWN_GRACE_MS: "500",
    ...options.env,
  };
  return {
    start() {
      const proc = spawn(process.execPath, [mainJs], {
        cwd: serviceDir,
        env,
        stdio: ["ignore", "pipe", "pipe"],
      });
      proc.stdout?.on("data", (c: Buffer) => (output += c.toString()));
      proc.stderr?.on("data", (c: Buffer) => (output += c.toString()));
      child = proc;
      return proc;
    },
    async kill() {
      const proc = child;
      if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
      const exited = new Promise((resolve) => proc.once("exit", resolve));
      proc.kill("SIGKILL");
      await exited;
    },
    output: () => output,
  };
}

export interface BillingProcessFixture {
  database: BillingDatabaseFixture;
  /** Use cases over the same database, for arranging and asserting from the test. */
  deps: BillingDeps;
  billing: BillingProcess;
  sqs: SQSClient;
  resolve: QueueUrlResolver;
  billingQueue: string;
  sessionsQueue: string;
  /** Kills the process, deletes the queues and drops the database. */
  close(): Promise<void>;
}

/**
 * A fresh database, billing's and sessions' queues under a unique prefix (created here, with the given
 * visibility timeout) and the billing process over them, not yet started.
 */
export async function openBillingProcessFixture(options: {
  name: string;
  minuteMs: number;
  visibilityTimeout?: number;
  maxReceiveCount?: number;
  env?: Record<string, string>;
}): Promise<BillingProcessFixture> {
  const sqs = createTestSqsClient();
  const resolve = createQueueUrlResolver(sqs);
  const prefix = `b${randomBytes(4).toString("hex")}-`;
  const billingQueue = `${prefix}${serviceQueueNames.billing}`;
  const sessionsQueue = `${prefix}${serviceQueueNames.sessions}`;
  const database = await openBillingTestDatabase(`billing_${options.name}`);
  const deps: BillingDeps = {
    db: database.database.db,
    settings: billingSettings(billingTestConfig({ STORAGE_DEFAULT_TIER: "none" })),
    publisher: createOutboxPublisher(),
    logger: pino({ level: "silent" }),
    clock: systemClock,
  };
  for (const name of [billingQueue, sessionsQueue]) {
    await ensureQueue(sqs, name, {
      maxReceiveCount: options.maxReceiveCount ?? 5,
      visibilityTimeout: options.visibilityTimeout ?? 30,
    });
  }
  const billing = billingProcess({
    databaseUrl: database.created.url,
    queuePrefix: prefix,
    minuteMs: options.minuteMs,
    env: { CREATE_QUEUES: "false", ...options.env },
  });
  return {
    database,
    deps,
    billing,
    sqs,
    resolve,
    billingQueue,
    sessionsQueue,
    async close() {
      await billing.kill();
      for (const name of [billingQueue, `${billingQueue}-dlq`, sessionsQueue, `${sessionsQueue}-dlq`]) {
        const url = await resolve(name).catch(() => undefined);
        if (url) await sqs.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined);
      }
      sqs.destroy();
      await database.close();
    },
  };
}
