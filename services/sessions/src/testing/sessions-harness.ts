import path from "node:path";
import http from "node:http";
import express, { type ErrorRequestHandler } from "express";
import * as OpenApiValidator from "express-openapi-validator";
import pino from "pino";
import {
  createJwtVerifier,
  loadConfig,
  loadOpenApiDocument,
  oidcSettings,
  startServer,
  type Closer,
  type RunningServer,
} from "@cgs/shared";
import type { DatabaseKind } from "@cgs/shared";
import { openTestDatabase, type OpenedTestDatabase } from "@cgs/shared/testing/db";
import {
  startTestIdentityProvider,
  TEST_ALLOWED_AZP,
  TEST_ALLOWED_AZP_ENV,
  type TestIdentityProvider,
} from "@cgs/shared/testing/tokens";
import { createGatewayApp, createGatewayUpstreamPool, loadGatewayConfig } from "@cgs/gateway";
import { closedPortUrl, gatewayTestEnv } from "../../../../test/harnesses/gateway-harness";
import { createApp, type SessionsContext } from "../app";
import type { TestClock } from "@cgs/shared/testing/clock";
import type { PrivateNetwork, SimulatedPrivateNetwork } from "../adapters/private-network";
import type { SimulatedCloudProvider } from "../adapters/simulated-cloud-provider";
import type { SimulatedStreamingHost } from "../adapters/streaming-host";
import {
  buildAdapters,
  domainDepsFor,
  reconcilerFor,
  startSessionsWorkers,
  type SimulationDrive,
} from "../composition";
import { sessionsConfigSchema, type SessionsConfig } from "../config";
import * as schema from "../data/schema";
import type { Reconciler } from "../domain/reconciler";
import type { SessionsDomainDeps } from "../domain/session-deps";
import type { StreamingCredentialVault } from "../domain/streaming-credentials";
import { startAccountsStandIn, type AccountsStandIn } from "./accounts-stand-in";
import { startBillingStandIn, type BillingStandIn } from "./billing-stand-in";

export const migrationsFolder = path.join(__dirname, "..", "..", "drizzle");

export interface HarnessOptions {
  db?: DatabaseKind;
  /** Extra sessions env (e.g. SESSION_START_TIMEOUT_MS). */
  env?: Record<string, string>;
  gatewayEnv?: Record<string, string>;
  /** Start the outbox relay, SQS consumer (moto) and the reconciler/idle loops. */
  workers?: boolean;
  bootDelayMs?: number;
  hostReadyDelayMs?: number;
  /** Validate every response against openapi.json (default true; the benchmark turns it off). */
  contractCheck?: boolean;
  /** Run the host agent's real code on every simulated instance, reporting to the host-report queue (moto). */
  hostAgents?: boolean;
  /** The use cases' clock (the play sweep, warnings); the system clock by default. */
  clock?: TestClock;
  /** The private network to use instead of the simulator (e.g. a real Headscale's adapter). */
  privateNetwork?: (db: SessionsDomainDeps["db"]) => PrivateNetwork;
  /** The simulators on a simulated clock driven by the caller (the capacity benchmark); pair it with `clock`. */
  simulation?: SimulationDrive;
}

export interface SessionsHarness {
  idp: TestIdentityProvider;
  billing: BillingStandIn;
  accounts: AccountsStandIn;
  cloud: SimulatedCloudProvider;
  regions: ReadonlyMap<string, SimulatedCloudProvider>;
  streamingHost: SimulatedStreamingHost;
  /** Per-instance streaming-host credentials (sealed in the sessions database) and report keys. */
  vault: StreamingCredentialVault;
  /** The host-report queue on moto (created on first use). */
  reportQueueUrl(): Promise<string>;
  /** The private network in use: the simulator unless `options.privateNetwork` chose another. */
  privateNetwork: SimulatedPrivateNetwork;
  database: OpenedTestDatabase<typeof schema>;
  config: SessionsConfig;
  deps: SessionsDomainDeps;
  reconciler: Reconciler;
  /** The sessions service, behind a response validator that checks every answer against openapi.json. */
  service: RunningServer;
  gateway: RunningServer;
  /** Responses that broke the contract (each also turned into a 500). */
  contractViolations: string[];
  token(accountId: string): Promise<string>;
  /** Calls the API through the gateway as `accountId`. */
  call(
    accountId: string,
    method: string,
    route: string,
    init?: { body?: unknown; headers?: Record<string, string>; direct?: boolean },
  ): Promise<{ status: number; body: any; headers: Headers }>; // eslint-disable-line @typescript-eslint/no-explicit-any
  close(): Promise<void>;
}

/** Wraps an app so every response it sends is validated against shared/openapi.json. */
function contractChecked(app: http.RequestListener, violations: string[]): express.Express {
  const outer = express();
  outer.use(
    OpenApiValidator.middleware({
      apiSpec: structuredClone(loadOpenApiDocument()) as never,
      validateRequests: false,
      validateResponses: true,
      validateSecurity: false,
      validateApiSpec: false,
      ignoreUndocumented: true,
    }),
  );
  outer.use(app);
  const onViolation: ErrorRequestHandler = (err: { message?: string }, req, res, _next) => {
    violations.push(`${req.method} ${req.path}: ${err.message ?? String(err)}`);
    res.status(500).json({ error: "INTERNAL", message: `contract violation: ${err.message ?? ""}` });
  };
  outer.use(onViolation);
  return outer;
}

let harnessCount = 0;

/**
 * The sessions service for real over HTTP with a PostgreSQL (or PGlite) database, the cloud, streaming-host
 * and private-network simulators, billing and accounts stand-ins, and a real gateway in front.
 */
export async function startSessionsHarness(options: HarnessOptions = {}): Promise<SessionsHarness> {
  const closers: Closer[] = [];
  // moto accepts any keys; the SDK's default chain must still find some.
  process.env.AWS_ACCESS_KEY_ID ||= "test";
  process.env.AWS_SECRET_ACCESS_KEY ||= "test";
  const idp = await startTestIdentityProvider();
  closers.unshift(() => idp.close());
  const verifierSettings = {
    OIDC_ISSUER: idp.issuer,
    OIDC_AUDIENCE: idp.audience,
    OIDC_ALLOWED_AZP: TEST_ALLOWED_AZP_ENV,
    OIDC_JWKS_URL: idp.jwksUrl,
    OIDC_JWKS_COOLDOWN_MS: "0",
  };
  const standInVerifier = createJwtVerifier({
    issuer: idp.issuer,
    audience: idp.audience,
    jwksUrl: idp.jwksUrl,
    allowedAzp: TEST_ALLOWED_AZP,
    clockToleranceSeconds: 5,
    jwksCooldownMs: 0,
  });
  const billing = await startBillingStandIn({ verifier: standInVerifier });
  const accounts = await startAccountsStandIn({ verifier: standInVerifier });
  closers.unshift(
    () => billing.close(),
    () => accounts.close(),
  );
  harnessCount += 1;
  const config = loadConfig(sessionsConfigSchema, {
    LOG_LEVEL: "silent",
    PORT: "0",
    ...verifierSettings,
    ACCOUNTS_URL: accounts.url,
    BILLING_URL: billing.url,
    AWS_ENDPOINT_URL: process.env.AWS_ENDPOINT_URL || "http://127.0.0.1:5000",
    QUEUE_NAME_PREFIX: `t${process.pid}-${harnessCount}-${Date.now().toString(36)}-`,
    CREATE_QUEUES: "true",
    QUEUE_WAIT_SECONDS: "1",
    OUTBOX_RELAY_INTERVAL_MS: "50",
    RECONCILER_INTERVAL_MS: "50",
    IDLE_SWEEP_INTERVAL_MS: "100",
    RECONCILER_DESCRIBE_GRACE_MS: "0",
    PAIRING_RETRY_DELAY_MS: "20",
    SIMULATOR_BOOT_DELAY_MS: String(options.bootDelayMs ?? 0),
    SIMULATOR_HOST_READY_DELAY_MS: String(options.hostReadyDelayMs ?? 0),
    SIMULATOR_START_DELAY_MS: "0",
    SIMULATOR_STOP_DELAY_MS: "0",
    SIMULATOR_ATTACH_DELAY_MS: "0",
    SIMULATOR_DETACH_DELAY_MS: "0",
    SIMULATOR_HOST_AGENTS: options.hostAgents ? "true" : "false",
    SIMULATOR_AGENT_REPORT_INTERVAL_MS: "1000",
    // A start's message names a new machine's typical time; with the simulator's 0 ms delays it would say "taking
    // longer than usual" at once.
    START_ESTIMATE_COLD_SECONDS: "240",
    ...options.env,
  });
  const database = await openTestDatabase(options.db ?? "pglite", "sessions", { schema, migrationsFolder });
  closers.unshift(() => database.destroy());
  const logger = pino({ level: "silent" });
  const adapters = buildAdapters(config, database.db, logger, {
    ...(options.privateNetwork ? { privateNetwork: options.privateNetwork(database.db) } : {}),
    ...(options.simulation ? { simulation: options.simulation } : {}),
  });
  const simulator = adapters.simulator!;
  const cloud = simulator.cloud;
  const streamingHost = simulator.streamingHost!;
  const privateNetwork = adapters.privateNetwork as SimulatedPrivateNetwork;
  simulator.beacons!.adopt(await simulator.beacons!.server.listen(0));
  closers.unshift(() => simulator.close());
  const deps = domainDepsFor(config, adapters, database.db, logger, options.clock);
  const context: SessionsContext = {
    config,
    logger,
    database,
    verifier: createJwtVerifier(oidcSettings(config)),
  };
  if (options.workers) {
    const workerClosers = await startSessionsWorkers(deps, database, config, {
      hostReports: { agentKey: adapters.agentKey, queueUrl: adapters.reportQueueUrl },
    });
    closers.unshift(async () => {
      for (const close of workerClosers) await close();
    });
  }
  const contractViolations: string[] = [];
  const sessionsApp = createApp(context, deps, simulator);
  const app =
    options.contractCheck === false ? sessionsApp : contractChecked(sessionsApp, contractViolations);
  const service = await startServer(app, { port: 0, logger, shutdownGraceMs: 1_000 });
  closers.unshift(() => service.stop());

  const gatewayConfig = loadGatewayConfig(
    gatewayTestEnv(
      idp,
      {
        sessions: service.url,
        billing: billing.url,
        accounts: accounts.url,
        "auth-proxy": await closedPortUrl(),
      },
      options.gatewayEnv,
    ),
  );
  const pool = createGatewayUpstreamPool(gatewayConfig);
  const gatewayApp = createGatewayApp({
    config: gatewayConfig,
    logger,
    verifier: createJwtVerifier(oidcSettings(gatewayConfig)),
    upstreamPool: pool,
  });
  const gateway = await startServer(gatewayApp, {
    port: 0,
    logger,
    shutdownGraceMs: 1_000,
    onClose: () => pool.destroy(),
  });
  closers.unshift(() => gateway.stop());

  const tokens = new Map<string, string>();
  const token = async (accountId: string) => {
    let t = tokens.get(accountId);
    if (!t) {
      t = await idp.sign({ sub: accountId });
      tokens.set(accountId, t);
    }
    return t;
  };

  return {
    idp,
    billing,
    accounts,
    cloud,
    /** Every simulated region's cloud, by region id (REGIONS in `env`). */
    regions: simulator.regions,
    streamingHost,
    vault: adapters.vault,
    reportQueueUrl: adapters.reportQueueUrl,
    privateNetwork,
    database,
    config,
    deps,
    reconciler: reconcilerFor(deps),
    service,
    gateway,
    contractViolations,
    token,
    async call(accountId, method, route, init = {}) {
      const base = init.direct ? service.url : gateway.url;
      const res = await fetch(`${base}${route}`, {
        method,
        headers: {
          authorization: `Bearer ${await token(accountId)}`,
          ...(init.body !== undefined ? { "content-type": "application/json" } : {}),
          ...init.headers,
        },
        body: init.body !== undefined ? JSON.stringify(init.body) : undefined,
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
    },
    async close() {
      for (const close of closers) await close();
    },
  };
}

/** Starts a session for the account through the gateway and ticks the reconciler until it is running and ready. */
export async function startRunningSession(
  h: SessionsHarness,
  accountId: string,
): Promise<{ instanceId: string; privateNetIp: string }> {
  const start = await h.call(accountId, "POST", "/api/v1/sessions/start");
  if (start.status !== 200) throw new Error(`start answered ${start.status}: ${JSON.stringify(start.body)}`);
  await h.reconciler.tick();
  const poll = await h.call(accountId, "GET", "/api/v1/sessions/poll");
  if (poll.body?.state !== "running" || poll.body?.ready !== true) {
    throw new Error(`session not running and ready: ${JSON.stringify(poll.body)}`);
  }
  return poll.body as { instanceId: string; privateNetIp: string };
}
