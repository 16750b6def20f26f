import { execFileSync } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import https from "node:https";
import type { AddressInfo } from "node:net";
import path from "node:path";
import {
  ASSIGN_MAX_SKEW_MS,
  ASSIGN_SIGNATURE_HEADER,
  ASSIGN_TIMESTAMP_HEADER,
  assignmentSchema,
  assignmentSignatureValid,
  normalizeFingerprint,
  type Assignment,
} from "../protocol/host-report";
import type { AgentLogger } from "../agent/host-agent";

export interface AssignmentServerOptions {
  port: number;
  host?: string;
  /** The pool slot's key: only the platform, which derived it, can sign an assignment. */
  poolKey: Buffer;
  /** Where the endpoint's TLS key and certificate live (made with openssl on first use). */
  tlsDir: string;
  /** Where an accepted assignment is written (0600) for the host's root-owned installer (cgs-assign.path). */
  spoolFile: string;
  now?: () => number;
  logger?: AgentLogger;
  onAssigned?(assignment: Assignment): void;
}

export interface AssignmentServer {
  port: number;
  /** SHA-256 of the endpoint's certificate, reported in every standby report for the platform to pin. */
  certSha256: string;
  close(): Promise<void>;
}

/** The endpoint's TLS identity: a key made once on the host and kept (the platform pins it from the reports). */
function tlsIdentity(dir: string): { key: string; cert: string } {
  const keyFile = path.join(dir, "assign.key");
  const certFile = path.join(dir, "assign.pem");
  if (!existsSync(keyFile) || !existsSync(certFile)) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-days",
        "3650",
      ].concat(["-subj", "/CN=cgs-host-agent", "-keyout", keyFile, "-out", certFile]),
      { stdio: "ignore" },
    );
  }
  return { key: readFileSync(keyFile, "utf8"), cert: readFileSync(certFile, "utf8") };
}

/**
 * A standby pool instance's assignment endpoint (HTTPS, POST /v1/assign). The platform claims the instance for a
 * session and sends that session's secrets here, signed with the pool slot's key and timestamped (an old request is
 * refused as a replay). An accepted assignment is written to the spool file, once (the same session sent again is
 * accepted again, nothing rewritten; another session is refused); the image's cgs-assign unit
 * installs it and restarts the agent for the session. The platform reaches this port from the sessions service only
 * (the streaming security group admits it from there, like Sunshine's API).
 */
export async function startAssignmentServer(options: AssignmentServerOptions): Promise<AssignmentServer> {
  const now = options.now ?? Date.now;
  const identity = tlsIdentity(options.tlsDir);
  const certSha256 = normalizeFingerprint(new X509Certificate(identity.cert).fingerprint256)!;
  // The session this instance took, if any (the spool file outlives an agent restart until cgs-assign installs it).
  let assignedTo: string | undefined = existsSync(options.spoolFile)
    ? (JSON.parse(readFileSync(options.spoolFile, "utf8")) as Assignment).sessionId
    : undefined;
  const server = https.createServer({ key: identity.key, cert: identity.cert }, (req, res) => {
    const answer = (status: number, error: string, message: string) =>
      res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify({ error, message }));
    if (req.method !== "POST" || req.url !== "/v1/assign") return answer(404, "NOT_FOUND", "Route not found");
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > 16_384) req.destroy();
      else chunks.push(c);
    });
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const timestamp = Number(req.headers[ASSIGN_TIMESTAMP_HEADER]);
      const signature = String(req.headers[ASSIGN_SIGNATURE_HEADER] ?? "");
      if (!Number.isFinite(timestamp) || Math.abs(now() - timestamp) > ASSIGN_MAX_SKEW_MS)
        return answer(401, "UNAUTHENTICATED", "The assignment's timestamp is missing or too far from now");
      if (!assignmentSignatureValid(body, timestamp, signature, options.poolKey))
        return answer(401, "UNAUTHENTICATED", "The assignment is not signed with this pool slot's key");
      let json: unknown;
      try {
        json = JSON.parse(body);
      } catch {
        return answer(400, "VALIDATION_ERROR", "body is not JSON");
      }
      const parsed = assignmentSchema.safeParse(json);
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        return answer(
          400,
          "VALIDATION_ERROR",
          `${issue?.path.join(".") ?? "body"}: ${issue?.message ?? "invalid"}`,
        );
      }
      // The platform repeats an assignment whose answer it lost: the same session is accepted again, once written.
      const accepted = () =>
        res.writeHead(202, { "content-type": "application/json" }).end(JSON.stringify({ accepted: true }));
      if (assignedTo === parsed.data.sessionId) return accepted();
      if (assignedTo) return answer(409, "ALREADY_ASSIGNED", "This instance already serves another session");
      assignedTo = parsed.data.sessionId;
      mkdirSync(path.dirname(options.spoolFile), { recursive: true, mode: 0o700 });
      const tmp = `${options.spoolFile}.tmp`;
      writeFileSync(tmp, JSON.stringify(parsed.data), { mode: 0o600 });
      renameSync(tmp, options.spoolFile);
      options.logger?.info({ sessionId: parsed.data.sessionId }, "assigned to a session");
      accepted();
      options.onAssigned?.(parsed.data);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host ?? "0.0.0.0", () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    certSha256,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
