import { signHostReport, type HostReport } from "../protocol/host-report";

/** Milliseconds since the last user input on the host's display; null when it cannot be read. */
export interface InputIdleReader {
  idleMs(): Promise<number | null>;
  close?(): void;
}

/** Streaming clients connected right now (Moonlight sessions on Sunshine's ports). */
export interface StreamingClientDetector {
  connectedClients(): Promise<number>;
}

/** Whether Sunshine's API answers. */
export interface SunshineProbe {
  answers(): Promise<boolean>;
}

/** SHA-256 (lower-case hex) of the certificate Sunshine serves; null while there is none. */
export interface CertificateSource {
  sha256(): Promise<string | null>;
}

/** Delivers one signed report (a JSON body) to the platform; throws when the platform cannot be reached. */
export interface ReportSink {
  send(body: string): Promise<void>;
}

/** Which cloud instance this is (EC2: IMDSv2). */
export interface InstanceIdentity {
  instanceId(): Promise<string>;
}

/** pino-compatible: the agent logs JSON lines on the host, the simulator passes the service's logger. */
export interface AgentLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** Whom the agent speaks for: the session it serves, or (a pre-booted pool instance) the pool slot it waits in. */
export type AgentRole =
  | { kind: "session"; sessionId: string }
  | {
      kind: "standby";
      poolId: string;
      /** Its assignment endpoint's certificate, for the platform to pin. */ assignCertSha256: string;
    };

export interface HostAgentSettings {
  role: AgentRole;
  /** The session's (or the pool slot's) own signing key (32 bytes), from /etc/cgs/agent.env. */
  agentKey: Buffer;
  /** A report at least this often, whether or not anything changed. */
  reportIntervalMs: number;
  /** How often the display, the connections and Sunshine are looked at. */
  sampleIntervalMs: number;
  /** Input after at least this long without any is a change, reported at once (the player is back). */
  inputResumedAfterMs: number;
  /** First and longest pause between attempts to deliver a report the platform did not take. */
  retryMinMs: number;
  retryMaxMs: number;
  agentVersion: string;
}

export interface HostAgentDeps {
  identity: InstanceIdentity;
  input: InputIdleReader;
  clients: StreamingClientDetector;
  sunshine: SunshineProbe;
  certificate: CertificateSource;
  sink: ReportSink;
  now?: () => number;
  logger?: AgentLogger;
}

export interface Observation {
  at: number;
  clientsConnected: number;
  idleMs: number | null;
  sunshineAnswers: boolean;
  certSha256: string | null;
}

const quietLogger: AgentLogger = { info: () => undefined, warn: () => undefined };

/** Why a report is due now, or null when it can wait for the interval. */
export function changeBetween(
  previous: Observation | undefined,
  current: Observation,
  inputResumedAfterMs: number,
): string | null {
  if (!previous) return "first report";
  if (previous.clientsConnected !== current.clientsConnected) return "streaming clients changed";
  if (previous.sunshineAnswers !== current.sunshineAnswers) return "sunshine availability changed";
  if (previous.certSha256 !== current.certSha256) return "certificate changed";
  const before = previous.idleMs;
  const now = current.idleMs;
  if (before !== null && now !== null && before >= inputResumedAfterMs && now < before)
    return "input resumed";
  return null;
}

/**
 * The host agent's loop: looks at the host every sample interval and reports what it saw every report interval,
 * or at once when it changed. A report the platform does not take is kept (only the latest: an older state is
 * worth nothing once a newer one exists) and delivered as soon as the platform answers again.
 */
export class HostAgent {
  private readonly now: () => number;
  private readonly logger: AgentLogger;
  private previous: Observation | undefined;
  private lastQueuedAt = Number.NEGATIVE_INFINITY;
  private seq = 0;
  private pending: { body: string; seq: number } | undefined;
  private retryDelayMs: number;
  private retryAt = 0;
  private instanceId: string | undefined;
  private flushing: Promise<boolean> | undefined;
  private warnedAbout = new Set<string>();
  /** Reports the platform has taken; for the agent's own tests and logs. */
  delivered = 0;

  constructor(
    private readonly settings: HostAgentSettings,
    private readonly deps: HostAgentDeps,
  ) {
    this.now = deps.now ?? Date.now;
    this.logger = deps.logger ?? quietLogger;
    this.retryDelayMs = settings.retryMinMs;
  }

  /** The report waiting for delivery, if any. */
  get pendingReport(): string | undefined {
    return this.pending?.body;
  }

  private async safely<T>(what: string, read: () => Promise<T>, fallback: T): Promise<T> {
    try {
      const value = await read();
      this.warnedAbout.delete(what);
      return value;
    } catch (err) {
      // Once per outage, not once per sample.
      if (!this.warnedAbout.has(what)) this.logger.warn({ err: String(err), what }, "host reading failed");
      this.warnedAbout.add(what);
      return fallback;
    }
  }

  async observe(): Promise<Observation> {
    const [clientsConnected, idleMs, sunshineAnswers, certSha256] = await Promise.all([
      this.safely("streaming clients", () => this.deps.clients.connectedClients(), 0),
      this.safely("input idle time", () => this.deps.input.idleMs(), null),
      this.safely("sunshine", () => this.deps.sunshine.answers(), false),
      this.safely("certificate", () => this.deps.certificate.sha256(), null),
    ]);
    return { at: this.now(), clientsConnected, idleMs, sunshineAnswers, certSha256 };
  }

  /** One look at the host: queues a report when one is due, then tries to deliver what is queued. */
  async tick(): Promise<{ reported: string | null; delivered: boolean }> {
    const current = await this.observe();
    const change = changeBetween(this.previous, current, this.settings.inputResumedAfterMs);
    this.previous = current;
    const due =
      change ?? (current.at - this.lastQueuedAt >= this.settings.reportIntervalMs ? "interval" : null);
    if (due) {
      await this.queue(current);
      if (due !== "interval") this.logger.info({ reason: due }, "reporting at once");
      // A change goes out now even while the last failure's back-off runs.
      if (due !== "interval") this.retryAt = 0;
    }
    const delivered = await this.flush();
    return { reported: due, delivered };
  }

  private async queue(observation: Observation): Promise<void> {
    this.instanceId ??= await this.deps.identity.instanceId();
    // Strictly growing across restarts too: the platform ignores a report not newer than the last it took.
    this.seq = Math.max(this.seq + 1, this.now());
    const { role } = this.settings;
    const report: HostReport = {
      kind: role.kind,
      instanceId: this.instanceId,
      sessionId: role.kind === "session" ? role.sessionId : null,
      poolId: role.kind === "standby" ? role.poolId : null,
      seq: this.seq,
      sentAt: new Date(this.now()).toISOString(),
      observedAt: new Date(observation.at).toISOString(),
      clientsConnected: observation.clientsConnected,
      lastInputAt:
        observation.idleMs === null ? null : new Date(observation.at - observation.idleMs).toISOString(),
      sunshineAnswers: observation.sunshineAnswers,
      certSha256: observation.certSha256,
      assignCertSha256: role.kind === "standby" ? role.assignCertSha256 : null,
      agentVersion: this.settings.agentVersion,
    };
    this.pending = { body: JSON.stringify(signHostReport(report, this.settings.agentKey)), seq: this.seq };
    this.lastQueuedAt = observation.at;
  }

  /** Sends the queued report unless a back-off is running; true when nothing is left to send. */
  flush(): Promise<boolean> {
    this.flushing ??= this.deliver().finally(() => {
      this.flushing = undefined;
    });
    return this.flushing;
  }

  private async deliver(): Promise<boolean> {
    const pending = this.pending;
    if (!pending) return true;
    if (this.now() < this.retryAt) return false;
    try {
      await this.deps.sink.send(pending.body);
    } catch (err) {
      this.logger.warn(
        { err: String(err), retryInMs: this.retryDelayMs },
        "platform did not take the report; kept for later",
      );
      this.retryAt = this.now() + this.retryDelayMs;
      this.retryDelayMs = Math.min(this.retryDelayMs * 2, this.settings.retryMaxMs);
      return false;
    }
    this.delivered += 1;
    this.retryDelayMs = this.settings.retryMinMs;
    this.retryAt = 0;
    // A newer report queued while this one was on its way stays queued.
    if (this.pending?.seq === pending.seq) this.pending = undefined;
    return this.pending === undefined;
  }

  /** Runs the loop on timers until stopped. */
  run(): { stop(): Promise<void> } {
    let stopped = false;
    let running: Promise<unknown> = Promise.resolve();
    const timer = setInterval(() => {
      if (stopped) return;
      running = running.then(() =>
        this.tick().catch((err: unknown) => this.logger.warn({ err: String(err) }, "agent tick failed")),
      );
    }, this.settings.sampleIntervalMs);
    running = this.tick().catch((err: unknown) =>
      this.logger.warn({ err: String(err) }, "agent tick failed"),
    );
    return {
      stop: async () => {
        stopped = true;
        clearInterval(timer);
        await running;
        this.deps.input.close?.();
      },
    };
  }
}
