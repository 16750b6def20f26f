import { randomBytes } from "node:crypto";
import { AGENT_VERSION, HostAgent, SqsReportSink, type AgentLogger } from "@cgs/host-agent";
import type { LaunchRequest } from "./cloud-provider";

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
  logger?: AgentLogger;
}

interface SimulatedHost {
  privateIp: string;
  agent: HostAgent;
  loop: { stop(): Promise<void> };
  sink: SqsReportSink;
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
 * control route (`cgs session play --simulate`), so warnings, Keep playing and idle stops happen as on EC2.
 */
export class SimulatedHosts {
  private readonly hosts = new Map<string, SimulatedHost>();

  constructor(private readonly settings: SimulatedHostSettings) {}

  /** The instance finished booting: its agent starts with the session's key and queue from the launch. */
  boot(instanceId: string, privateIp: string, request: LaunchRequest): void {
    const agentEnv = request.hostAgent;
    if (!agentEnv || this.hosts.has(instanceId)) return;
    const sink = new SqsReportSink(agentEnv.reportQueueUrl, {
      region: agentEnv.region,
      endpoint: this.settings.endpoint,
    });
    const fingerprint = randomBytes(32).toString("hex");
    const host: Partial<SimulatedHost> = { privateIp, clients: 0, lastInputAt: Date.now(), sink };
    const agent = new HostAgent(
      {
        sessionId: request.sessionId,
        agentKey: Buffer.from(agentEnv.key, "base64url"),
        reportIntervalMs: this.settings.reportIntervalMs,
        sampleIntervalMs: this.settings.sampleIntervalMs,
        inputResumedAfterMs: 60_000,
        retryMinMs: 1_000,
        retryMaxMs: 30_000,
        agentVersion: `${AGENT_VERSION}-simulated`,
      },
      {
        identity: { instanceId: () => Promise.resolve(instanceId) },
        input: { idleMs: () => Promise.resolve(Date.now() - host.lastInputAt!) },
        clients: { connectedClients: () => Promise.resolve(host.clients!) },
        sunshine: { answers: () => Promise.resolve(this.settings.sunshineAnswers(privateIp)) },
        certificate: { sha256: () => Promise.resolve(fingerprint) },
        sink,
        logger: this.settings.logger,
      },
    );
    host.agent = agent;
    host.loop = agent.run();
    this.hosts.set(instanceId, host as SimulatedHost);
  }

  /** The instance is gone: its agent stops with it. */
  async shutdown(instanceId: string): Promise<void> {
    const host = this.hosts.get(instanceId);
    if (!host) return;
    this.hosts.delete(instanceId);
    await host.loop.stop();
    host.sink.close();
  }

  has(instanceId: string): boolean {
    return this.hosts.has(instanceId);
  }

  /** A pretend streaming client or input; the agent reports the change at once. */
  async play(
    instanceId: string,
    input: PlayInput,
  ): Promise<{ clientsConnected: number; lastInputAt: string } | undefined> {
    const host = this.hosts.get(instanceId);
    if (!host) return undefined;
    if (input.connected !== undefined) host.clients = input.connected ? 1 : 0;
    if (input.connected) this.settings.clientConnected?.(host.privateIp);
    if (input.input) host.lastInputAt = Date.now();
    await host.agent.tick();
    return { clientsConnected: host.clients, lastInputAt: new Date(host.lastInputAt).toISOString() };
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.hosts.keys()].map((id) => this.shutdown(id)));
  }
}
