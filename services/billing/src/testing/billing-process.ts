import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";

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
