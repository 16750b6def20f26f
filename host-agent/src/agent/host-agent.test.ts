import { randomBytes, randomUUID } from "node:crypto";
import net from "node:net";
import type { AddressInfo } from "node:net";
import type { SQSClient } from "@aws-sdk/client-sqs";
import { startCuttableProxy, type CuttableProxy } from "@cgs/shared/testing/cuttable-proxy";
import { createTestQueue, createTestSqsClient, drainQueue, type TestQueue } from "@cgs/shared/testing/queue";
import { ImdsIdentity, StaticIdentity } from "../adapters/host-probes";
import { SqsReportSink } from "../adapters/sqs-report-sink";
import { ProcNetClientDetector } from "../adapters/streaming-client-detector";
import { X11IdleReader } from "../adapters/x11-idle-reader";
import { hasValidSignature, parseSignedHostReport, type HostReport } from "../protocol/host-report";
import { startXvfb, type Xvfb } from "../testing/xvfb";
import { HostAgent, type HostAgentSettings } from "./host-agent";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const MOTO = {
  host: "127.0.0.1",
  port: Number(new URL(process.env.SQS_ENDPOINT || "http://127.0.0.1:5000").port),
};

// The agent's real loop against a real X server (Xvfb + xdotool), the kernel's socket table and SQS on moto.
// Sunshine cannot be installed here: its probe and certificate are the only stand-ins (fixed answers).
describe("the host agent reports play to the platform's queue", () => {
  let sqs: SQSClient;
  let queue: TestQueue;
  let x: Xvfb;
  let streaming: net.Server;
  let streamingPort: number;
  const key = randomBytes(32);
  const sessionId = randomUUID();
  const peers = new Set<net.Socket>();

  beforeAll(async () => {
    process.env.AWS_ACCESS_KEY_ID ||= "test";
    process.env.AWS_SECRET_ACCESS_KEY ||= "test";
    sqs = createTestSqsClient();
    queue = await createTestQueue(sqs, "host-reports");
    x = await startXvfb();
    streaming = net.createServer((s) => {
      peers.add(s);
      s.on("close", () => peers.delete(s));
    });
    await new Promise<void>((resolve) => streaming.listen(0, "127.0.0.1", resolve));
    streamingPort = (streaming.address() as AddressInfo).port;
  });
  afterAll(async () => {
    for (const s of peers) s.destroy();
    await new Promise((r) => streaming.close(r));
    await x.stop();
    await queue.remove();
    sqs.destroy();
  });

  const settings = (overrides: Partial<HostAgentSettings> = {}): HostAgentSettings => ({
    role: { kind: "session", sessionId },
    agentKey: key,
    reportIntervalMs: 60_000,
    sampleIntervalMs: 100,
    inputResumedAfterMs: 700,
    retryMinMs: 50,
    retryMaxMs: 200,
    agentVersion: "test",
    ...overrides,
  });

  const agentFor = (sinkEndpoint: string, overrides: Partial<HostAgentSettings> = {}) => {
    const input = new X11IdleReader(x.display);
    return new HostAgent(settings(overrides), {
      identity: new StaticIdentity("i-0123456789abcdef0"),
      input,
      clients: new ProcNetClientDetector({ tcp: [streamingPort], udp: { from: 1, to: 1 } }),
      sunshine: { answers: () => Promise.resolve(true) },
      certificate: { sha256: () => Promise.resolve("ab".repeat(32)) },
      sink: new SqsReportSink(queue.queueUrl, { region: "us-east-1", endpoint: sinkEndpoint }),
    });
  };

  const received = async (): Promise<HostReport[]> => {
    const reports: HostReport[] = [];
    for (const message of await drainQueue(sqs, queue.queueUrl, { waitTimeSeconds: 0 })) {
      const parsed = parseSignedHostReport(message.Body ?? "");
      if (!parsed.ok) throw new Error(parsed.problem);
      expect(hasValidSignature(parsed.signed, key)).toBe(true);
      reports.push(parsed.signed.report);
    }
    return reports;
  };

  it("when it starts, then its first report names the instance and session, signed with the session's key", async () => {
    const agent = agentFor(`http://${MOTO.host}:${MOTO.port}`);
    const result = await agent.tick();
    expect(result).toEqual({ reported: "first report", delivered: true });
    const [report] = await received();
    expect(report).toMatchObject({
      kind: "session",
      instanceId: "i-0123456789abcdef0",
      sessionId,
      poolId: null,
      assignCertSha256: null,
      clientsConnected: 0,
      sunshineAnswers: true,
      certSha256: "ab".repeat(32),
    });
    expect(Date.now() - Date.parse(report!.lastInputAt!)).toBeGreaterThanOrEqual(0);
  });

  it("when it waits in a pool, then its reports name the pool slot and its assignment endpoint's certificate, never a session, signed with the slot's key", async () => {
    const poolId = randomUUID();
    const agent = agentFor(`http://${MOTO.host}:${MOTO.port}`, {
      role: { kind: "standby", poolId, assignCertSha256: "cd".repeat(32) },
    });
    await agent.tick();
    const [report] = await received();
    expect(report).toMatchObject({
      kind: "standby",
      poolId,
      sessionId: null,
      assignCertSha256: "cd".repeat(32),
    });
  });

  it("when nothing changes, then nothing is sent before the report interval, and a report once it has passed", async () => {
    const agent = agentFor(`http://${MOTO.host}:${MOTO.port}`, { reportIntervalMs: 600 });
    await agent.tick();
    await received();
    expect((await agent.tick()).reported).toBeNull();
    await sleep(650);
    expect((await agent.tick()).reported).toBe("interval");
    expect(await received()).toHaveLength(1);
  });

  it("when the player comes back to the keyboard after a pause, then a report with the new input time goes out at once", async () => {
    const agent = agentFor(`http://${MOTO.host}:${MOTO.port}`);
    await agent.tick();
    await received();
    await sleep(800);
    expect((await agent.tick()).reported).toBeNull();
    const before = Date.now();
    x.xdotool("mousemove", String(50 + Math.floor(Math.random() * 400)), "80");
    expect((await agent.tick()).reported).toBe("input resumed");
    const [report] = await received();
    expect(Date.parse(report!.lastInputAt!)).toBeGreaterThanOrEqual(before - 1_000);
  });

  it("when a streaming client connects and disconnects, then each change is reported at once", async () => {
    const agent = agentFor(`http://${MOTO.host}:${MOTO.port}`);
    await agent.tick();
    await received();
    const client = net.connect(streamingPort, "127.0.0.1");
    await new Promise((r) => client.once("connect", r));
    expect((await agent.tick()).reported).toBe("streaming clients changed");
    expect((await received())[0]).toMatchObject({ clientsConnected: 1 });
    client.destroy();
    for (let i = 0; i < 40 && (await agent.tick()).reported === null; i += 1) await sleep(25);
    expect((await received())[0]).toMatchObject({ clientsConnected: 0 });
  });

  it("when the platform cannot be reached, then only the latest state is kept and it is delivered once it can", async () => {
    const proxy: CuttableProxy = await startCuttableProxy(MOTO);
    try {
      const agent = agentFor(proxy.url);
      await agent.tick();
      await received();
      await proxy.cut();
      const client = net.connect(streamingPort, "127.0.0.1");
      await new Promise((r) => client.once("connect", r));
      expect(await agent.tick()).toEqual({ reported: "streaming clients changed", delivered: false });
      client.destroy();
      for (let i = 0; i < 40 && (await agent.tick()).reported === null; i += 1) await sleep(25);
      expect(agent.pendingReport).toContain('"clientsConnected":0');
      await proxy.restore();
      for (let i = 0; i < 40 && !(await agent.flush()); i += 1) await sleep(50);
      const reports = await received();
      // The connection came and went while the platform was away: what arrives is where the host is now.
      expect(reports.map((r) => r.clientsConnected)).toEqual([0]);
      expect(agent.pendingReport).toBeUndefined();
    } finally {
      await proxy.close();
    }
  });

  it("when it runs on EC2, then it reads its instance id through IMDSv2 (moto's instance metadata)", async () => {
    expect(await new ImdsIdentity(`http://${MOTO.host}:${MOTO.port}`).instanceId()).toMatch(/^i-/);
  });
});
