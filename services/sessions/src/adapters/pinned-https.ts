import * as https from "node:https";
import * as net from "node:net";
import type { Duplex } from "node:stream";
import * as tls from "node:tls";
import { normalizeFingerprint } from "@cgs/host-agent";

/** The host's certificate is not the one pinned for it, or none is pinned yet: nothing was sent. */
export class HostIdentityError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "HostIdentityError";
  }
}

export interface HostReply {
  status: number;
  text: string;
}

export interface PinnedRequest {
  url: URL;
  method: "GET" | "POST";
  headers?: Record<string, string>;
  body?: string;
  /** The SHA-256 the host's certificate must have (lower-case hex). */
  pinned: string;
  timeoutMs: number;
  /** Names the host in errors. */
  describe: string;
}

/**
 * HTTPS to a streaming instance, whose certificates are self-signed: chain verification gives way to pinning, the
 * TLS handshake must present the certificate with the pinned SHA-256, checked before a byte of the request (its
 * credentials or secrets) is written. One connection per call, no agent.
 */
export function pinnedHttpsRequest(request: PinnedRequest): Promise<HostReply> {
  const { url, pinned, body } = request;
  return new Promise<HostReply>((resolve, reject) => {
    let socket: tls.TLSSocket | undefined;
    const req = https.request({
      method: request.method,
      host: url.hostname,
      port: url.port || 443,
      path: url.pathname + url.search,
      headers: {
        "content-type": "application/json",
        ...request.headers,
        ...(body === undefined ? {} : { "content-length": Buffer.byteLength(body) }),
      },
      createConnection: (_options: unknown, done: (err: Error | null, stream?: Duplex) => void) => {
        socket = tls.connect({
          host: url.hostname,
          port: Number(url.port || 443),
          // Chain and name verification give way to the fingerprint comparison below.
          rejectUnauthorized: false,
          ...(net.isIP(url.hostname) ? {} : { servername: url.hostname }),
        });
        socket.once("secureConnect", () => {
          const presented = normalizeFingerprint(socket?.getPeerCertificate().fingerprint256);
          if (presented === pinned) return done(null, socket);
          socket?.destroy();
          done(
            new HostIdentityError(`${request.describe} presented a certificate other than the one pinned`),
          );
        });
        socket.once("error", (err) => done(err));
        return undefined;
      },
    } as https.RequestOptions);
    const timer = setTimeout(() => {
      const err = new Error(`${request.describe} did not answer within ${request.timeoutMs} ms`);
      req.destroy(err);
      socket?.destroy();
    }, request.timeoutMs);
    req.on("response", (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") });
      });
      res.on("error", (err) => {
        clearTimeout(timer);
        reject(err);
      });
    });
    req.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.end(body);
  });
}
