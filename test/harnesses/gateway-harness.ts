import { freePort, listenLocally } from "@cgs/shared/testing/ports";
import http from "node:http";
import pino from "pino";
import { createClient } from "redis";
import { createJwtVerifier, oidcSettings, startServer, type RunningServer } from "@cgs/shared";
import { TEST_ALLOWED_AZP_ENV, type TestIdentityProvider } from "@cgs/shared/testing/tokens";
import {
  createGatewayApp,
  createGatewayUpstreamPool,
  loadGatewayConfig,
  replicaCountFromConfig,
  type GatewayDeps,
} from "@cgs/gateway";

export interface RecordedRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

export interface FakeUpstream {
  owner: string;
  url: string;
  requests: RecordedRequest[];
  close(): Promise<void>;
}

export type UpstreamHandler = (req: RecordedRequest, res: http.ServerResponse) => void;

/** A real HTTP server standing in for a service: records every request, answers 200 {owner, path} unless told otherwise. */
export async function startFakeUpstream(owner: string, handler?: UpstreamHandler): Promise<FakeUpstream> {
  const requests: RecordedRequest[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const recorded = {
        method: req.method ?? "",
        url: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks),
      };
      requests.push(recorded);
      if (handler) {
        handler(recorded, res);
        return;
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ owner, path: recorded.url }));
    });
  });
  return { owner, requests, ...(await listenLocally(server)) };
}

/** A port nothing listens on (bound then released). */
export async function closedPortUrl(): Promise<string> {
  return `http://127.0.0.1:${await freePort()}`;
}

/**
 * A connected Redis client that does not reconnect (REDIS_URL, else the peer on 6379), or an error saying how to
 * start Redis.
 */
export async function connectRedis(url = process.env.REDIS_URL || "redis://127.0.0.1:6379") {
  const client = createClient({ url, socket: { connectTimeout: 2_000, reconnectStrategy: false } });
  client.on("error", () => undefined);
  try {
    await client.connect();
  } catch (err) {
    throw new Error(
      `Redis is required at ${url} (start it with: bash test/peers/up.sh redis): ${String(err)}`,
    );
  }
  return client;
}

export interface TestGateway extends RunningServer {
  upstreams: Record<"sessions" | "billing" | "accounts" | "auth-proxy", FakeUpstream>;
  close(): Promise<void>;
}

export function gatewayTestEnv(
  idp: TestIdentityProvider,
  upstreamUrls: Record<string, string>,
  env: Record<string, string> = {},
) {
  return {
    LOG_LEVEL: "silent",
    PORT: "0",
    OIDC_ISSUER: idp.issuer,
    OIDC_AUDIENCE: idp.audience,
    OIDC_ALLOWED_AZP: TEST_ALLOWED_AZP_ENV,
    OIDC_JWKS_URL: idp.jwksUrl,
    OIDC_JWKS_COOLDOWN_MS: "0",
    SESSIONS_URL: upstreamUrls.sessions ?? "",
    BILLING_URL: upstreamUrls.billing ?? "",
    ACCOUNTS_URL: upstreamUrls.accounts ?? "",
    AUTH_PROXY_URL: upstreamUrls["auth-proxy"] ?? "",
    ...env,
  };
}

/** The gateway (createGatewayApp) over real HTTP on 127.0.0.1:0, with four fake upstreams and the test identity provider. */
export async function startTestGateway(
  idp: TestIdentityProvider,
  options: {
    env?: Record<string, string>;
    redis?: GatewayDeps["redis"];
    upstreamHandler?: UpstreamHandler;
  } = {},
): Promise<TestGateway> {
  const upstreams = {
    sessions: await startFakeUpstream("sessions", options.upstreamHandler),
    billing: await startFakeUpstream("billing", options.upstreamHandler),
    accounts: await startFakeUpstream("accounts", options.upstreamHandler),
    "auth-proxy": await startFakeUpstream("auth-proxy", options.upstreamHandler),
  };
  const config = loadGatewayConfig(
    gatewayTestEnv(
      idp,
      Object.fromEntries(Object.entries(upstreams).map(([k, u]) => [k, u.url])),
      options.env,
    ),
  );
  const logger = pino({ level: "silent" });
  const pool = createGatewayUpstreamPool(config);
  const replicas = replicaCountFromConfig(config, logger);
  const app = createGatewayApp({
    config,
    logger,
    verifier: createJwtVerifier(oidcSettings(config)),
    redis: options.redis,
    upstreamPool: pool,
    replicas,
  });
  const running = await startServer(app, {
    port: 0,
    logger,
    shutdownGraceMs: 2_000,
    onClose: [() => pool.destroy(), () => replicas.close()],
  });
  return {
    ...running,
    upstreams,
    async close() {
      await running.stop();
      await Promise.all(Object.values(upstreams).map((u) => u.close()));
    },
  };
}
