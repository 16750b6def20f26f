import { randomBytes, randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, statSync, existsSync } from "node:fs";
import https from "node:https";
import { tmpdir } from "node:os";
import path from "node:path";
import type { TLSSocket } from "node:tls";
import {
  ASSIGN_SIGNATURE_HEADER,
  ASSIGN_TIMESTAMP_HEADER,
  normalizeFingerprint,
  signAssignment,
  type Assignment,
} from "../protocol/host-report";
import { startAssignmentServer, type AssignmentServer } from "./assignment-server";

interface Reply {
  status: number;
  body: { error?: string; message?: string; accepted?: boolean };
  certSha256: string | undefined;
}

/** What the platform sends, over real TLS (the endpoint's certificate is self-signed: read, not verified). */
function post(port: number, body: string, headers: Record<string, string>): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: "127.0.0.1",
        port,
        method: "POST",
        path: "/v1/assign",
        rejectUnauthorized: false,
        headers: { "content-type": "application/json", ...headers },
      },
      (res) => {
        const certSha256 = normalizeFingerprint(
          (res.socket as TLSSocket).getPeerCertificate().fingerprint256,
        );
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            body: JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}") as Reply["body"],
            certSha256,
          }),
        );
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

describe("a standby pool instance's assignment endpoint", () => {
  const poolKey = randomBytes(32);
  let dir: string;
  let spool: string;
  let server: AssignmentServer;
  let clock = Date.now();

  const assignment = (overrides: Partial<Assignment> = {}): Assignment => ({
    sessionId: randomUUID(),
    agentKey: randomBytes(32).toString("base64url"),
    sunshineUsername: "cgs-0a1b2c3d",
    sunshinePassword: randomBytes(24).toString("base64url"),
    privateNetworkKey: "hskey-auth-abc",
    privateNetworkLoginServer: "https://headscale.example.test",
    volumeId: "vol-0123456789abcdef0",
    ...overrides,
  });

  const send = (body: string, options: { key?: Buffer; at?: number } = {}) => {
    const at = options.at ?? clock;
    return post(server.port, body, {
      [ASSIGN_TIMESTAMP_HEADER]: String(at),
      [ASSIGN_SIGNATURE_HEADER]: signAssignment(body, at, options.key ?? poolKey),
    });
  };

  const start = () =>
    startAssignmentServer({
      port: 0,
      host: "127.0.0.1",
      poolKey,
      tlsDir: path.join(dir, "tls"),
      spoolFile: spool,
      now: () => clock,
    });

  beforeEach(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "assign-"));
    spool = path.join(dir, "run", "assignment.json");
    clock = Date.now();
    server = await start();
  });
  afterEach(async () => {
    await server.close();
  });

  it("when the platform sends a session signed with the pool slot's key, then it is spooled once, readable by its owner only, over the certificate the reports name", async () => {
    const sent = assignment();
    const reply = await send(JSON.stringify(sent));
    expect(reply.status).toBe(202);
    expect(reply.certSha256).toBe(server.certSha256);
    expect(JSON.parse(readFileSync(spool, "utf8"))).toEqual(sent);
    expect(statSync(spool).mode & 0o777).toBe(0o600);
  });

  it("when an assignment is signed with another key, then it is refused and nothing is spooled", async () => {
    const reply = await send(JSON.stringify(assignment()), { key: randomBytes(32) });
    expect(reply).toMatchObject({ status: 401, body: { error: "UNAUTHENTICATED" } });
    expect(existsSync(spool)).toBe(false);
  });

  it("when a captured assignment is replayed three minutes later, then it is refused", async () => {
    const body = JSON.stringify(assignment());
    const at = clock;
    clock += 3 * 60_000;
    const reply = await send(body, { at });
    expect(reply).toMatchObject({ status: 401, body: { message: expect.stringMatching(/timestamp/) } });
    expect(existsSync(spool)).toBe(false);
  });

  it("when a field is missing, then the answer names it", async () => {
    const { agentKey: _dropped, ...partial } = assignment();
    const reply = await send(JSON.stringify(partial));
    expect(reply).toMatchObject({ status: 400, body: { error: "VALIDATION_ERROR" } });
    expect(reply.body.message).toMatch(/^agentKey: /);
  });

  it("when the same session is sent again (its answer was lost), then it is accepted again; another session is refused and the first stays", async () => {
    const first = assignment();
    expect((await send(JSON.stringify(first))).status).toBe(202);
    expect((await send(JSON.stringify(first))).status).toBe(202);
    const other = await send(JSON.stringify(assignment()));
    expect(other).toMatchObject({ status: 409, body: { error: "ALREADY_ASSIGNED" } });
    expect(JSON.parse(readFileSync(spool, "utf8"))).toEqual(first);
  });

  it("when the agent restarts before the assignment is installed, then it keeps its certificate and still refuses another session", async () => {
    const first = assignment();
    await send(JSON.stringify(first));
    const certBefore = server.certSha256;
    await server.close();
    server = await start();
    expect(server.certSha256).toBe(certBefore);
    expect((await send(JSON.stringify(assignment()))).status).toBe(409);
    expect((await send(JSON.stringify(first))).status).toBe(202);
  });
});
