import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { cpSync, readdirSync, rmSync, statSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { childBuildDir, transpileForChildren } from "../testing/child-build";
import { createTestDatabase, type TestDatabase } from "../testing/db";
import {
  createTestQueue,
  createTestSqsClient,
  DEFAULT_TEST_SQS_ENDPOINT,
  waitUntil,
  type TestQueue,
} from "../testing/queue";
import { testMigrationsFolder } from "../testing/test-migrations";
import { startOtlpReceiver, type CollectedSpan, type OtlpReceiver } from "../testing/tracing";

const sharedSrc = path.resolve(__dirname, "..");
const buildDir = childBuildDir("cgs-trace-test");

/** Transpiles the telemetry preload and the fixture service (and what they import) to CommonJS. */
function buildForChildProcesses(): void {
  const walk = (dir: string): string[] =>
    readdirSync(dir).flatMap((entry) => {
      const full = path.join(dir, entry);
      return statSync(full).isDirectory() ? walk(full) : [full];
    });
  const sources = ["db", "queue", "metrics", "tracing", "testing"]
    .flatMap((dir) => walk(path.join(sharedSrc, dir)))
    .concat([path.join(sharedSrc, "events.ts"), path.join(sharedSrc, "telemetry.ts")])
    .filter((file) => file.endsWith(".ts") && !file.endsWith(".test.ts"));
  transpileForChildren(sources, buildDir);
  cpSync(testMigrationsFolder, path.join(buildDir, "testing/migrations"), { recursive: true });
}

interface RunningService {
  child: ChildProcess;
  lines: Record<string, unknown>[];
  ready: Promise<Record<string, unknown>>;
  exited: Promise<number | null>;
}

function startService(role: string, env: Record<string, string>): RunningService {
  const { NODE_OPTIONS: _ignored, ...inherited } = process.env;
  const child = spawn(
    process.execPath,
    [
      "--import",
      pathToFileURL(path.join(buildDir, "telemetry.js")).href,
      path.join(buildDir, "testing/trace-fixture-service.js"),
    ],
    {
      env: { ...inherited, ...env, ROLE: role, OTEL_SERVICE_NAME: `trace-test-${role}` },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  const lines: Record<string, unknown>[] = [];
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const ready = new Promise<Record<string, unknown>>((resolve, reject) => {
    let buffered = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      buffered += chunk.toString();
      const parts = buffered.split("\n");
      buffered = parts.pop() ?? "";
      for (const part of parts) {
        try {
          const line = JSON.parse(part) as Record<string, unknown>;
          lines.push(line);
          if (line.ready) resolve(line);
        } catch {
          // not JSON: ignore
        }
      }
    });
    void exited.then((code) => reject(new Error(`${role} exited with ${code}: ${stderr}`)));
  });
  return { child, lines, ready, exited };
}

async function stopService(service: RunningService): Promise<void> {
  if (service.child.exitCode === null) service.child.kill("SIGTERM");
  await service.exited;
}

describe("one trace across HTTP, the outbox, SQS and a consumer in another process", () => {
  const sqs = createTestSqsClient();
  let receiver: OtlpReceiver;
  let database: TestDatabase;
  let queue: TestQueue;
  const services: RunningService[] = [];

  beforeAll(async () => {
    buildForChildProcesses();
    [receiver, database, queue] = await Promise.all([
      startOtlpReceiver(),
      createTestDatabase("shared_trace"),
      createTestQueue(sqs, "trace"),
    ]);
  });
  afterAll(async () => {
    await Promise.all(services.map(stopService));
    await Promise.all([receiver?.close(), queue?.remove(), database?.drop()]);
    rmSync(buildDir, { recursive: true, force: true });
  });

  it("when a request with a gateway traceparent enqueues an event, then server, publish and consumer spans and the worker's logs share its trace id", async () => {
    const env = {
      DATABASE_URL: database.url,
      MIGRATIONS_FOLDER: path.join(buildDir, "testing/migrations"),
      QUEUE_NAME: queue.name,
      SQS_ENDPOINT: process.env.SQS_ENDPOINT || DEFAULT_TEST_SQS_ENDPOINT,
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      OTEL_BSP_SCHEDULE_DELAY: "100",
    };
    const api = startService("api", env);
    services.push(api);
    const { port } = await api.ready;
    const worker = startService("worker", env);
    services.push(worker);
    await worker.ready;

    const gatewayTraceId = randomBytes(16).toString("hex");
    const gatewaySpanId = randomBytes(8).toString("hex");
    const response = await fetch(`http://127.0.0.1:${String(port)}/events`, {
      method: "POST",
      headers: { traceparent: `00-${gatewayTraceId}-${gatewaySpanId}-01` },
    });
    expect(response.status).toBe(202);
    const { id: eventId } = (await response.json()) as { id: string };

    const handledLog = await waitUntil(
      () => worker.lines.find((line) => line.msg === "event handled" && line.eventId === eventId),
      { timeoutMs: 15_000, description: "worker handled the event" },
    );
    await Promise.all([stopService(api), stopService(worker)]);

    const spans = receiver.spans();
    const inTrace = (s: CollectedSpan) => s.traceId === gatewayTraceId;
    const server = spans.find((s) => s.serviceName === "trace-test-api" && s.kind === 2 && inTrace(s));
    const publish = spans.find(
      (s) => s.serviceName === "trace-test-api" && s.kind === 4 && s.attributes["cgs.event.id"] === eventId,
    );
    const consumer = spans.find(
      (s) =>
        s.serviceName === "trace-test-worker" && s.kind === 5 && s.attributes["cgs.event.id"] === eventId,
    );

    expect(server).toBeDefined();
    expect(server?.parentSpanId).toBe(gatewaySpanId);
    expect(publish?.traceId).toBe(server?.traceId);
    expect(consumer?.traceId).toBe(server?.traceId);
    expect(consumer?.attributes["cgs.outcome"]).toBe("handled");
    // The consumer hangs under the message's send (ours or the aws-sdk instrumentation's), itself under publish.
    const sendChain = spans
      .filter((s) => inTrace(s) && s.serviceName === "trace-test-api")
      .map((s) => s.spanId);
    expect(sendChain).toContain(consumer?.parentSpanId);
    // The worker's database work and its log lines belong to the same trace.
    if (process.env.DEBUG_TRACE_TEST)
      console.log(spans.map((s) => [s.serviceName, s.kind, s.name, s.traceId, s.spanId, s.parentSpanId]));
    const workerQueries = spans.filter(
      (s) => s.serviceName === "trace-test-worker" && s.kind === 3 && inTrace(s),
    );
    expect(
      workerQueries.some(
        (s) => (s.attributes["db.system"] ?? s.attributes["db.system.name"]) === "postgresql",
      ),
    ).toBe(true);
    expect(handledLog.trace_id).toBe(gatewayTraceId);
  });
});
