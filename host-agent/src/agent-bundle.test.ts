import { spawn } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { SQSClient } from "@aws-sdk/client-sqs";
import {
  createTestQueue,
  createTestSqsClient,
  drainQueue,
  waitUntil,
  type TestQueue,
} from "@cgs/shared/testing/queue";
import { hasValidSignature, parseSignedHostReport } from "./protocol/host-report";
import { selfSignedCertificate } from "./testing/self-signed";
import { startXvfb, type Xvfb } from "./testing/xvfb";

// The file the streaming image installs, run the way its systemd unit runs it: `node cgs-host-agent.cjs` with the
// environment cloud-init writes. Sunshine is a stand-in (an HTTPS server with a self-signed certificate).
describe("the bundled host agent", () => {
  let bundle: string;
  let sqs: SQSClient;
  let queue: TestQueue;
  let x: Xvfb;
  let sunshine: https.Server;
  let sunshineUrl: string;
  const cert = selfSignedCertificate();

  beforeAll(async () => {
    const { bundleHostAgent } = (await import(path.join(__dirname, "..", "scripts", "bundle.mjs"))) as {
      bundleHostAgent(out: string): Promise<string>;
    };
    bundle = await bundleHostAgent(
      path.join(mkdtempSync(path.join(tmpdir(), "agent-")), "cgs-host-agent.cjs"),
    );
    process.env.AWS_ACCESS_KEY_ID ||= "test";
    process.env.AWS_SECRET_ACCESS_KEY ||= "test";
    sqs = createTestSqsClient();
    queue = await createTestQueue(sqs, "bundle-reports");
    x = await startXvfb();
    sunshine = https.createServer({ key: cert.key, cert: cert.cert }, (req, res) => {
      res.writeHead(req.headers.authorization ? 200 : 401).end("{}");
    });
    await new Promise<void>((resolve) => sunshine.listen(0, "127.0.0.1", resolve));
    sunshineUrl = `https://127.0.0.1:${(sunshine.address() as AddressInfo).port}`;
  }, 60_000);
  afterAll(async () => {
    await new Promise((r) => sunshine.close(r));
    await x.stop();
    await queue.remove();
    sqs.destroy();
  });

  const run = (env: Record<string, string>) => {
    const child = spawn(process.execPath, [bundle], {
      env: { PATH: process.env.PATH ?? "", AWS_ACCESS_KEY_ID: "test", AWS_SECRET_ACCESS_KEY: "test", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (c: Buffer) => (output += c.toString()));
    child.stderr.on("data", (c: Buffer) => (output += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    return { child, exited, output: () => output };
  };

  it("when started with a session's environment, then signed reports with Sunshine's certificate fingerprint arrive, and SIGTERM stops it cleanly", async () => {
    const key = randomBytes(32);
    const sessionId = randomUUID();
    const agent = run({
      CGS_SESSION_ID: sessionId,
      CGS_AGENT_KEY: key.toString("base64url"),
      CGS_REPORT_QUEUE_URL: queue.queueUrl,
      AWS_REGION: "us-east-1",
      AWS_ENDPOINT_URL: process.env.SQS_ENDPOINT || "http://127.0.0.1:5000",
      CGS_INSTANCE_ID: "i-0bundle000000000",
      DISPLAY: x.display,
      SUNSHINE_API_URL: sunshineUrl,
      SUNSHINE_USERNAME: "cgs-abc",
      SUNSHINE_PASSWORD: "secret",
      SUNSHINE_CERT_FILE: cert.certFile,
      CGS_SAMPLE_INTERVAL_MS: "200",
    });
    try {
      const messages = await waitUntil(
        async () => {
          const got = await drainQueue(sqs, queue.queueUrl, { waitTimeSeconds: 1 });
          return got.length > 0 ? got : undefined;
        },
        { timeoutMs: 20_000, description: `a report (agent output: ${agent.output()})` },
      );
      const parsed = parseSignedHostReport(messages[0]!.Body ?? "");
      if (!parsed.ok) throw new Error(parsed.problem);
      expect(hasValidSignature(parsed.signed, key)).toBe(true);
      expect(parsed.signed.report).toMatchObject({
        sessionId,
        instanceId: "i-0bundle000000000",
        sunshineAnswers: true,
        certSha256: cert.sha256,
      });
      expect(parsed.signed.report.lastInputAt).not.toBeNull();
    } finally {
      agent.child.kill("SIGTERM");
    }
    expect(await agent.exited).toBe(0);
    expect(agent.output()).toContain('"msg":"host agent stopping"');
  });

  it("when its environment lacks the signing key, then it exits 78 naming the variable and sends nothing", async () => {
    const agent = run({ CGS_SESSION_ID: randomUUID(), CGS_REPORT_QUEUE_URL: queue.queueUrl });
    expect(await agent.exited).toBe(78);
    expect(agent.output()).toContain("CGS_AGENT_KEY");
  });
});
