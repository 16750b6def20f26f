import type http from "node:http";
import type { IncomingHttpHeaders } from "node:http";
import { createRequire } from "node:module";
import { context, propagation } from "@opentelemetry/api";
import type { Agent as UndiciAgent, Dispatcher } from "undici";
import type { NextFunction, Request, Response } from "express";
import type { Logger } from "pino";
import { AppError, HEADERS } from "@cgs/shared";

export interface UpstreamProxyOptions {
  /** The keep-alive pool (createUpstreamPool); its connect timeout applies. */
  agent: Dispatcher;
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

const NO_TOKENS: ReadonlySet<string> = new Set();

/** Header names a Connection header lists (RFC 9110 §7.6.1); the usual values name none that matter. */
function connectionTokens(value: string | string[] | undefined): ReadonlySet<string> {
  // "keep-alive" names the Keep-Alive header, which is dropped anyway.
  if (value === undefined || value === "keep-alive" || value === "close") return NO_TOKENS;
  const joined = Array.isArray(value) ? value.join(",") : value;
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
    // Without a length the pool sends the stream chunked.
    if (req.headers["content-length"] !== undefined)
      headers["content-length"] = req.headers["content-length"];
  }
  return headers;
}

function responseHeaders(upstream: IncomingHttpHeaders): http.OutgoingHttpHeaders {
  const named = connectionTokens(upstream.connection);
  const headers: http.OutgoingHttpHeaders = {};
  for (const name in upstream) {
    const value = upstream[name];
    if (value === undefined || RESPONSE_HEADERS_DROPPED.has(name) || named.has(name)) continue;
    headers[name] = value;
  }
  return headers;
}

// Only undici's Agent (and what it loads on use): its index also loads fetch, WebSocket, caches and mocks, which
// cost the gateway about 20 MB of resident memory under load for nothing it uses. undici has no exports map, so
// the path is public; every gateway test goes through it, so an upgrade that moves it fails them.
const Agent = createRequire(__filename)("undici/lib/dispatcher/agent") as typeof UndiciAgent;

export interface UpstreamPoolOptions {
  /** Keep-alive connections per upstream origin at most. */
  maxSockets: number;
  /** Max wait to open a connection, in ms. */
  connectTimeoutMs: number;
}

/**
 * The keep-alive pool every forwarded request goes through (undici: a bare proxy on it served 1.2-1.6x the
 * requests of one on node:http's client, and the gateway used 15-25 % less CPU a request; see the gateway
 * README). One per process; close it on shutdown. It reads an upstream's `Keep-Alive: timeout` hint and retires idle connections before then.
 */
export function createUpstreamPool({ maxSockets, connectTimeoutMs }: UpstreamPoolOptions): Dispatcher {
  return new Agent({ connections: maxSockets, connect: { timeout: connectTimeoutMs } });
}

// RFC 9110 §9.2.2: only these may be replayed without knowing whether the first attempt was applied.
const IDEMPOTENT = new Set(["GET", "HEAD", "OPTIONS", "PUT", "DELETE"]);
// The connection broke before any byte of the answer: typically a pooled connection the upstream was closing.
const CONNECTION_LOST = new Set(["UND_ERR_SOCKET", "ECONNRESET", "EPIPE"]);
const TIMED_OUT = new Set(["UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT"]);

class ClientGone extends Error {
  constructor() {
    super("client closed the connection");
  }
}

export type Forwarder = (req: Request, res: Response, next: NextFunction, target: ForwardTarget) => void;

/**
 * A small reverse proxy on an undici pool: connect and response timeouts, bodies streamed both ways with
 * backpressure, hop-by-hop headers stripped. An upstream that is down or silent answers 503 UNAVAILABLE fast;
 * an idempotent request whose connection broke before any answer is replayed once.
 */
export function createUpstreamProxy(options: UpstreamProxyOptions): Forwarder {
  const { agent, responseTimeoutMs, logger } = options;
  // A handful of upstream base URLs, parsed once rather than per request.
  const parsed = new Map<string, { origin: string; host: string; prefix: string }>();
  const baseOf = (upstream: string) => {
    let base = parsed.get(upstream);
    if (!base) {
      const url = new URL(upstream);
      parsed.set(
        upstream,
        (base = { origin: url.origin, host: url.host, prefix: url.pathname.replace(/\/+$/, "") }),
      );
    }
    return base;
  };

  return (req, res, next, target) => {
    const base = baseOf(target.upstream);
    const headers = upstreamRequestHeaders(req, res, target, base.host);
    const dispatchOptions: Dispatcher.DispatchOptions = {
      origin: base.origin,
      path: `${base.prefix}${req.originalUrl}`,
      method: req.method as Dispatcher.HttpMethod,
      headers: headers as Record<string, string | string[]>,
      body: target.body === "stream" ? req : (target.body ?? null),
      headersTimeout: responseTimeoutMs,
      bodyTimeout: responseTimeoutMs,
    };
    let clientGone = false;

    const attempt = (retry: boolean): void => {
      let controller: Dispatcher.DispatchController | undefined;
      let answered = false;
      const abortUpstream = (): void => {
        if (res.writableFinished) return;
        clientGone = true;
        controller?.abort(new ClientGone());
      };
      res.once("close", abortUpstream);
      const resume = (): void => controller?.resume();

      agent.dispatch(dispatchOptions, {
        onRequestStart(c) {
          controller = c;
          if (clientGone) c.abort(new ClientGone());
        },
        onResponseStart(_c, statusCode, upstreamHeaders) {
          if (statusCode < 200) return; // 1xx: informational, not forwarded
          answered = true;
          res.writeHead(statusCode, responseHeaders(upstreamHeaders));
        },
        onResponseData(c, chunk) {
          if (res.write(chunk)) return;
          c.pause();
          res.once("drain", resume);
        },
        onResponseEnd() {
          res.off("close", abortUpstream);
          res.end();
        },
        onResponseError(_c, err: Error & { code?: string }) {
          res.off("close", abortUpstream);
          if (clientGone) return;
          if (answered || res.headersSent || res.destroyed) {
            // The answer broke off midway: the client sees a truncated response, never a wrong one.
            res.destroy();
            return;
          }
          if (
            retry &&
            target.body !== "stream" &&
            IDEMPOTENT.has(req.method) &&
            CONNECTION_LOST.has(err.code ?? "")
          ) {
            attempt(false);
            return;
          }
          const timedOut = TIMED_OUT.has(err.code ?? "");
          // req.log makes the request's child logger: only here, on failure.
          const log = (req as { log?: Logger }).log ?? logger;
          log.warn({ owner: target.owner, code: err.code, reason: err.message }, "upstream request failed");
          next(
            AppError.unavailable(
              timedOut
                ? `The ${target.owner} service did not answer in time`
                : `The ${target.owner} service is unavailable`,
              5,
            ),
          );
        },
      });
    };
    attempt(true);
  };
}
