import { randomBytes } from "node:crypto";
import {
  AGENT_VERSION,
  HostAgent,
  SqsReportSink,
  type AgentLogger,
  type AgentRole,
  type Assignment,
  type ReportSink,
} from "@cgs/host-agent";
import type { LaunchRequest, PoolLaunchRequest } from "./cloud-provider";
import { AlreadyAssignedError, type AssignTarget, type HostAssigner } from "./host-assigner";
import { HostIdentityError } from "./pinned-https";

export interface SimulatedHostSettings {
  region: string;
  /** moto locally; the agents send to the queue their launch named. */
  endpoint?: string;
  reportIntervalMs: number;
  sampleIntervalMs: number;
  /** Whether Sunshine on the host at this address answers (the streaming-host simulator). */
  sunshineAnswers(hostIp: string): boolean;
  /** A pretend client connecting finishes a pairing the host is waiting for (the streaming-host simulator). */
  clientConnected?(hostIp: string): void;
  /** Where reports go: SQS (the queue the launch names) unless a benchmark hands them over in process. */
  sink?: (queueUrl: string) => ReportSink & { close?(): void };
  /** Run the agents on their own timers (npm start, tests); off, a caller drives them with `tickAll()`. */
  realTime?: boolean;
  now?: () => number;
  logger?: AgentLogger;
}

interface SimulatedHost {
  privateIp: string;
  /** A standby host's assignment endpoint certificate (what its reports name). */
  assignCertSha256: string | null;
  launch: LaunchRequest | PoolLaunchRequest;
  agent: HostAgent;
  loop?: { stop(): Promise<void> };
  sink: ReportSink & { close?(): void };
  clients: number;
  lastInputAt: number;
}

export interface PlayInput {
  /** A pretend streaming client connects (true) or leaves (false). */
  connected?: boolean;
  /** Input on the host's display now. */
  input?: boolean;
}

/**
 * The simulated instances' hosts for `npm start`: each runs the host agent's real code (its loop, signing and SQS
 * delivery) with a pretend display and pretend streaming clients a developer drives through the simulator's
 * control route (`cgs session play --simulate`), so warnings, Keep playing and idle stops happen as on EC2. A pool
 * instance's agent waits in standby until the platform assigns it a session.
 */
export class SimulatedHosts {
  private readonly hosts = new Map<string, SimulatedHost>();
  /** What each instance was assigned (what the image's cgs-assign would have installed). */
  private readonly assignments = new Map<string, Assignment>();
  private readonly now: () => number;

  constructor(private readonly settings: SimulatedHostSettings) {
    this.now = settings.now ?? Date.now;
  }

  /** The instance finished booting: its agent starts, for its session or (a pool instance) in standby. */
  boot(instanceId: string, privateIp: string, launch: LaunchRequest | PoolLaunchRequest): void {
    const agentEnv = launch.hostAgent;
    if (!agentEnv || this.hosts.has(instanceId)) return;
    const role: AgentRole =
      "sessionId" in launch
        ? { kind: "session", sessionId: launch.sessionId }
        : { kind: "standby", poolId: launch.poolId, assignCertSha256: this.assignCertFor(instanceId) };
    this.start(instanceId, privateIp, launch, role, Buffer.from(agentEnv.key, "base64url"));
  }

  /** Made at an instance's first boot and kept on its disk: the same certificate after a stop and start. */
  private readonly assignCerts = new Map<string, string>();

  private assignCertFor(instanceId: string): string {
    const cert = this.assignCerts.get(instanceId) ?? randomBytes(32).toString("hex");
    this.assignCerts.set(instanceId, cert);
    return cert;
  }

  /** The session a pool instance took, as its host holds it (tests look at its private-network key). */
  assignmentOf(instanceId: string): Assignment | undefined {
    return this.assignments.get(instanceId);
  }

  /** The certificate a standby host's assignment endpoint presents; undefined when no standby host runs there. */
  assignCertOf(instanceId: string): string | undefined {
    return this.hosts.get(instanceId)?.assignCertSha256 ?? undefined;
  }

  private start(
    instanceId: string,
    privateIp: string,
    launch: LaunchRequest | PoolLaunchRequest,
    role: AgentRole,
    key: Buffer,
  ): void {
    const queueUrl = launch.hostAgent!.reportQueueUrl;
    const sink =
      this.settings.sink?.(queueUrl) ??
      new SqsReportSink(queueUrl, { region: launch.hostAgent!.region, endpoint: this.settings.endpoint });
    const fingerprint = randomBytes(32).toString("hex");
    const host: SimulatedHost = {
      privateIp,
      assignCertSha256: role.kind === "standby" ? role.assignCertSha256 : null,
      launch,
      sink,
      clients: 0,
      lastInputAt: this.now(),
      agent: undefined as unknown as HostAgent,
    };
    host.agent = new HostAgent(
      {
        role,
        agentKey: key,
        reportIntervalMs: this.settings.reportIntervalMs,
        sampleIntervalMs: this.settings.sampleIntervalMs,
        inputResumedAfterMs: 60_000,
        retryMinMs: 1_000,
        retryMaxMs: 30_000,
        agentVersion: `${AGENT_VERSION}-simulated`,
      },
      {
        identity: { instanceId: () => Promise.resolve(instanceId) },
        input: {
          idleMs: () => Promise.resolve(role.kind === "session" ? this.now() - host.lastInputAt : null),
        },
        clients: { connectedClients: () => Promise.resolve(host.clients) },
        sunshine: {
          answers: () => Promise.resolve(role.kind === "session" && this.settings.sunshineAnswers(privateIp)),
        },
        certificate: { sha256: () => Promise.resolve(role.kind === "session" ? fingerprint : null) },
        sink,
        now: this.now,
        logger: this.settings.logger,
      },
    );
    if (this.settings.realTime !== false) host.loop = host.agent.run();
    this.hosts.set(instanceId, host);
  }

  /**
   * The platform assigned the standby host a session (what the real agent's assignment endpoint and the image's
   * cgs-assign unit do): the session's credentials are installed, and the agent restarts for the session.
   */
  async assign(instanceId: string, assignment: Assignment): Promise<"accepted" | "other_session" | "down"> {
    const host = this.hosts.get(instanceId);
    if (!host) return "down";
    if ("sessionId" in host.launch) {
      return host.launch.sessionId === assignment.sessionId ? "accepted" : "other_session";
    }
    await this.shutdown(instanceId);
    this.assignments.set(instanceId, assignment);
    const launch: LaunchRequest = {
      sessionId: assignment.sessionId,
      accountId: "",
      availabilityZone: host.launch.availabilityZone,
      hostAgent: { ...host.launch.hostAgent!, key: assignment.agentKey },
    };
    this.start(
      instanceId,
      host.privateIp,
      launch,
      { kind: "session", sessionId: assignment.sessionId },
      Buffer.from(assignment.agentKey, "base64url"),
    );
    return "accepted";
  }

  /** The instance is gone or stopped: its agent stops with it. */
  async shutdown(instanceId: string): Promise<void> {
    const host = this.hosts.get(instanceId);
    if (!host) return;
    this.hosts.delete(instanceId);
    await host.loop?.stop();
    host.sink.close?.();
  }

  has(instanceId: string): boolean {
    return this.hosts.has(instanceId);
  }

  /** One look at every host by its agent (a caller driving a simulated clock). */
  async tickAll(): Promise<void> {
    await Promise.all([...this.hosts.values()].map((h) => h.agent.tick()));
  }

  /** A pretend streaming client or input; the agent reports the change at once. */
  async play(
    instanceId: string,
    input: PlayInput,
  ): Promise<{ clientsConnected: number; lastInputAt: string } | undefined> {
    const host = this.hosts.get(instanceId);
    if (!host || !("sessionId" in host.launch)) return undefined;
    if (input.connected !== undefined) host.clients = input.connected ? 1 : 0;
    if (input.connected) this.settings.clientConnected?.(host.privateIp);
    if (input.input) host.lastInputAt = this.now();
    await host.agent.tick();
    return { clientsConnected: host.clients, lastInputAt: new Date(host.lastInputAt).toISOString() };
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.hosts.keys()].map((id) => this.shutdown(id)));
  }
}

/**
 * The assignment on the simulators, as HttpsHostAssigner does it on EC2: refused unless the instance's standby agent
 * runs and presents the pinned certificate; then the host installs the session's credentials (the cloud simulator's
 * record, which the streaming-host simulator checks) and Sunshine starts.
 */
export class SimulatedHostAssigner implements HostAssigner {
  constructor(
    private readonly hosts: SimulatedHosts,
    private readonly installed: {
      installCredentials(instanceId: string, credentials: { username: string; password: string }): void;
    },
    private readonly sunshine: { restart(hostIp: string): void } | undefined,
  ) {}

  async assign(target: AssignTarget, assignment: Assignment): Promise<void> {
    const cert = this.hosts.assignCertOf(target.instanceId);
    if (cert === undefined) throw new Error(`pool instance ${target.instanceId} is not answering`);
    if (cert !== target.certSha256) {
      throw new HostIdentityError(
        `pool instance ${target.instanceId} presented a certificate other than the one pinned`,
      );
    }
    const outcome = await this.hosts.assign(target.instanceId, assignment);
    if (outcome === "down") throw new Error(`pool instance ${target.instanceId} is not answering`);
    if (outcome === "other_session") {
      throw new AlreadyAssignedError(`pool instance ${target.instanceId} already serves another session`);
    }
    this.installed.installCredentials(target.instanceId, {
      username: assignment.sunshineUsername,
      password: assignment.sunshinePassword,
    });
    this.sunshine?.restart(target.privateIp);
  }
}
