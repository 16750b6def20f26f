import http from "node:http";
import { context, propagation } from "@opentelemetry/api";
import type { NextFunction, Request, Response } from "express";
import type { Logger } from "pino";
import { AppError, HEADERS } from "@cgs/shared";

export interface UpstreamProxyOptions {
  agent: http.Agent;
  connectTimeoutMs: number;
  /** Max wait for response headers, and max idle time while the body streams. */
  responseTimeoutMs: number;
  logger: Logger;
}

export interface ForwardTarget {
  /** Upstream base URL, e.g. http://127.0.0.1:8101. */
  upstream: string;
  /** Service name, for messages and logs. */
  owner: string;
  /** Verified access token to send as `Authorization: Bearer`; omitted on public routes. */
  token?: string;
  /** The already-read body (forwarded byte for byte), or "stream" to pipe the request through untouched. */
  body: Buffer | "stream" | undefined;
}

// RFC 9110 §7.6.1 connection-specific headers, plus what the gateway sets itself.
const REQUEST_HEADERS_DROPPED = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "host",
  "expect",
  "content-length",
  // Credentials: the gateway forwards only the token it verified, as a bearer; the session cookie stays here.
  "authorization",
  "cookie",
  "x-forwarded-for",
  "x-forwarded-host",
  "x-forwarded-proto",
  "forwarded",
]);

const RESPONSE_HEADERS_DROPPED = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "x-powered-by",
]);

function connectionTokens(value: string | string[] | undefined): Set<string> {
  const joined = Array.isArray(value) ? value.join(",") : (value ?? "");
  return new Set(
    joined
      .split(",")
      .map((t) => t.trim().toLowerCase())
      .filter(Boolean),
  );
}

export function upstreamRequestHeaders(
  req: Request,
  res: Response,
  target: ForwardTarget,
  upstreamHost: string,
): http.OutgoingHttpHeaders {
  const named = connectionTokens(req.headers.connection);
  const headers: http.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || REQUEST_HEADERS_DROPPED.has(name) || named.has(name)) continue;
    headers[name] = value;
  }
  headers.host = upstreamHost;
  headers["x-forwarded-for"] = req.ip ?? req.socket.remoteAddress ?? "";
  headers["x-forwarded-proto"] = req.protocol;
  if (req.headers.host) headers["x-forwarded-host"] = req.headers.host;
  const requestId = (res.locals as { requestId?: string }).requestId;
  if (requestId) headers[HEADERS.requestId] = requestId;
  if (target.token) headers.authorization = `Bearer ${target.token}`;
  // The request's span continues in the service (the gateway makes its own spans; node:http is not patched).
  propagation.inject(context.active(), headers);
  if (Buffer.isBuffer(target.body)) {
    headers["content-length"] = String(target.body.length);
  } else if (target.body === "stream") {
    if (req.headers["content-length"] !== undefined)
      headers["content-length"] = req.headers["content-length"];
    else if (req.headers["transfer-encoding"] !== undefined) headers["transfer-encoding"] = "chunked";
  }
  return headers;
}

function responseHeaders(upstream: http.IncomingMessage): http.OutgoingHttpHeaders {
  const named = connectionTokens(upstream.headers.connection);
  const headers: http.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(upstream.headers)) {
    if (value === undefined || RESPONSE_HEADERS_DROPPED.has(name) || named.has(name)) continue;
    headers[name] = value;
  }
  return headers;
}

class UpstreamTimeout extends Error {
  constructor(readonly phase: "connect" | "response") {
    super(`upstream ${phase} timeout`);
  }
}

export type Forwarder = (req: Request, res: Response, next: NextFunction, target: ForwardTarget) => void;

/**
 * A small reverse proxy on node:http: keep-alive pool, connect and response timeouts, streamed response
 * bodies, hop-by-hop headers stripped. An upstream that is down or silent answers 503 UNAVAILABLE fast.
 */
export function createUpstreamProxy(options: UpstreamProxyOptions): Forwarder {
  const { agent, connectTimeoutMs, responseTimeoutMs, logger } = options;
  // A handful of upstream base URLs, parsed once rather than per request.
  const parsed = new Map<string, URL>();
  const urlOf = (upstream: string): URL => {
    let url = parsed.get(upstream);
    if (!url) parsed.set(upstream, (url = new URL(upstream)));
    return url;
  };

  return (req, res, next, target) => {
    const base = urlOf(target.upstream);
    const path = `${base.pathname.replace(/\/+$/, "")}${req.originalUrl}`;
    const headers = upstreamRequestHeaders(req, res, target, base.host);
    const log = (req as { log?: Logger }).log ?? logger;
    let clientGone = false;

    const attempt = (retry: boolean): void => {
      let settled = false;
      const upstreamReq = http.request({
        protocol: base.protocol,
        hostname: base.hostname,
        port: base.port,
        method: req.method,
        path,
        headers,
        agent,
      });
      let connectTimer: NodeJS.Timeout | undefined;
      upstreamReq.on("socket", (socket) => {
        if (!socket.connecting) return;
        connectTimer = setTimeout(
          () => upstreamReq.destroy(new UpstreamTimeout("connect")),
          connectTimeoutMs,
        );
        socket.once("connect", () => clearTimeout(connectTimer));
      });
      upstreamReq.setTimeout(responseTimeoutMs, () => upstreamReq.destroy(new UpstreamTimeout("response")));

      const abortUpstream = (): void => {
        if (res.writableFinished) return;
        clientGone = true;
        upstreamReq.destroy();
      };
      res.once("close", abortUpstream);

      upstreamReq.on("response", (upstreamRes) => {
        settled = true;
        clearTimeout(connectTimer);
        res.writeHead(upstreamRes.statusCode ?? 502, responseHeaders(upstreamRes));
        upstreamRes.pipe(res);
        upstreamRes.on("error", () => res.destroy());
        upstreamRes.on("aborted", () => res.destroy());
      });

      upstreamReq.on("error", (err: NodeJS.ErrnoException) => {
        clearTimeout(connectTimer);
        res.off("close", abortUpstream);
        if (settled) {
          res.destroy();
          return;
        }
        settled = true;
        // A pooled keep-alive socket the upstream closed a moment ago: safe to replay once if we hold the body.
        if (clientGone) return;
        if (retry && upstreamReq.reusedSocket && err.code === "ECONNRESET" && target.body !== "stream") {
          attempt(false);
          return;
        }
        if (res.headersSent || res.destroyed) {
          res.destroy();
          return;
        }
        const timedOut = err instanceof UpstreamTimeout && err.phase === "response";
        log.warn({ owner: target.owner, code: err.code, reason: err.message }, "upstream request failed");
        next(
          AppError.unavailable(
            timedOut
              ? `The ${target.owner} service did not answer in time`
              : `The ${target.owner} service is unavailable`,
            5,
          ),
        );
      });

      if (target.body === "stream") {
        req.pipe(upstreamReq);
        req.on("aborted", () => upstreamReq.destroy());
      } else {
        upstreamReq.end(target.body);
      }
    };
    attempt(true);
  };
}
