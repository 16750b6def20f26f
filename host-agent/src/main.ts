import { loadConfig } from "@cgs/shared/dist/config";
import { HostAgent, type AgentLogger, type AgentRole } from "./agent/host-agent";
import { startAssignmentServer } from "./adapters/assignment-server";
import { CertificateFile, HttpSunshineProbe, ImdsIdentity, StaticIdentity } from "./adapters/host-probes";
import { SqsReportSink } from "./adapters/sqs-report-sink";
import { ProcNetClientDetector } from "./adapters/streaming-client-detector";
import { X11IdleReader } from "./adapters/x11-idle-reader";
import { agentConfigSchema } from "./config";
import { AGENT_VERSION } from "./version";

/** One JSON line per event on stdout: journald keeps them, `journalctl -u cgs-host-agent` shows them. */
const logger: AgentLogger & { error(obj: object, msg: string): void } = {
  info: (obj, msg) =>
    console.log(JSON.stringify({ level: "info", time: new Date().toISOString(), msg, ...obj })),
  warn: (obj, msg) =>
    console.log(JSON.stringify({ level: "warn", time: new Date().toISOString(), msg, ...obj })),
  error: (obj, msg) =>
    console.log(JSON.stringify({ level: "error", time: new Date().toISOString(), msg, ...obj })),
};

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig(agentConfigSchema);
  } catch (err) {
    logger.error({ err: String(err) }, "invalid configuration");
    process.exit(78); // EX_CONFIG: systemd shows it; restarting will not help
  }
  const sink = new SqsReportSink(config.CGS_REPORT_QUEUE_URL, {
    region: config.AWS_REGION,
    endpoint: config.AWS_ENDPOINT_URL,
  });
  const agentKey = Buffer.from(config.CGS_AGENT_KEY, "base64url");
  // A pool instance waits, pre-booted, for a session: it reports as standby and serves its assignment endpoint.
  let role: AgentRole;
  let assignment: { close(): Promise<void> } | undefined;
  if (config.CGS_POOL_ID) {
    const server = await startAssignmentServer({
      port: config.CGS_ASSIGN_PORT,
      poolKey: agentKey,
      tlsDir: config.CGS_ASSIGN_TLS_DIR,
      spoolFile: config.CGS_ASSIGN_SPOOL,
      logger,
    });
    assignment = server;
    role = { kind: "standby", poolId: config.CGS_POOL_ID, assignCertSha256: server.certSha256 };
  } else {
    role = { kind: "session", sessionId: config.CGS_SESSION_ID! };
  }
  const agent = new HostAgent(
    {
      role,
      agentKey,
      reportIntervalMs: config.CGS_REPORT_INTERVAL_MS,
      sampleIntervalMs: config.CGS_SAMPLE_INTERVAL_MS,
      inputResumedAfterMs: config.CGS_INPUT_RESUMED_AFTER_MS,
      retryMinMs: 1_000,
      retryMaxMs: 30_000,
      agentVersion: AGENT_VERSION,
    },
    {
      identity: config.CGS_INSTANCE_ID
        ? new StaticIdentity(config.CGS_INSTANCE_ID)
        : new ImdsIdentity(config.CGS_IMDS_ENDPOINT),
      input: new X11IdleReader(config.DISPLAY, config.XAUTHORITY),
      clients: new ProcNetClientDetector(
        { tcp: config.CGS_STREAMING_TCP_PORTS, udp: config.CGS_STREAMING_UDP_PORTS },
        "/proc/net",
        config.CGS_STREAM_STATE_FILE,
      ),
      sunshine: new HttpSunshineProbe(
        config.SUNSHINE_API_URL,
        config.SUNSHINE_USERNAME && config.SUNSHINE_PASSWORD
          ? { username: config.SUNSHINE_USERNAME, password: config.SUNSHINE_PASSWORD }
          : undefined,
      ),
      certificate: new CertificateFile(config.SUNSHINE_CERT_FILE),
      sink,
      logger,
    },
  );
  logger.info({ ...role, version: AGENT_VERSION }, "host agent started");
  const running = agent.run();
  const stop = (signal: string) => {
    logger.info({ signal }, "host agent stopping");
    void running
      .stop()
      .then(() => assignment?.close())
      .then(() => {
        sink.close();
        process.exit(0);
      });
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
}

main().catch((err: unknown) => {
  logger.error({ err: String(err) }, "host agent could not start");
  process.exit(1);
});
