import { Client } from "pg";
import { startCuttableProxy, type CuttableProxy } from "@cgs/shared/testing/cuttable-proxy";
import { startOwnPostgres, type OwnPostgres } from "@cgs/shared/testing/own-postgres";
import { startOwnRedis, type OwnRedis } from "@cgs/shared/testing/own-redis";
import { fastJourneyEnv, launchPlatform, portOpen, type LaunchedPlatform } from "../platform/launch-platform";

/** The platform's processes, in the order npm start's launcher gives them ports (the gateway last). */
export const SERVICES = ["sessions", "billing", "accounts", "auth-proxy", "gateway"] as const;
export type ServiceName = (typeof SERVICES)[number];
const DATABASES = { sessions: "soak_sessions", billing: "soak_billing", accounts: "soak_accounts" } as const;

/** A session minute and a billed minute of the soak: test clocks, never real minutes. */
export const SOAK_MINUTE_MS = 1_000;

/**
 * `npm start`'s launcher (test/platform/start.mjs) with peers of the soak's own wherever a fault stops one: its own
 * PostgreSQL cluster (the services' databases) and Redis (the gateway's rate limits) on free ports, and cuttable
 * TCP hops in front of the shared moto (the SQS endpoint) and the shared Keycloak (the JWKS and admin API), so an
 * outage of either is a cut of the hop: the shared peers are never stopped. Services killed with SIGKILL are
 * started again by the launcher on their port (PLATFORM_RESTART_KILLED).
 */
export interface SoakPlatform {
  platform: LaunchedPlatform;
  postgres: OwnPostgres;
  redis: OwnRedis;
  sqs: CuttableProxy;
  idp: CuttableProxy;
  base: string;
  queuePrefix: string;
  portOf(service: ServiceName): number;
  /** A superuser connection to a service's database on the soak's PostgreSQL. */
  database(service: keyof typeof DATABASES): Promise<Client>;
  /** Whether the service answers its readiness probe. */
  ready(service: ServiceName): Promise<boolean>;
  close(): Promise<void>;
}

/** Ten ports in a row (a service's metrics port is its port + 1000): the gateway, then the four services. */
async function portBlock(): Promise<number> {
  for (;;) {
    const start = 20_000 + Math.floor(Math.random() * 8_000);
    const ports = [0, 1, 2, 3, 4].flatMap((i) => [start + i, start + i + 1000]);
    const used = await Promise.all(ports.map(portOpen));
    if (!used.some(Boolean)) return start;
  }
}

export async function startSoakPlatform(): Promise<SoakPlatform> {
  const postgres = await startOwnPostgres();
  const redis = await startOwnRedis();
  const admin = new Client({ connectionString: postgres.adminUrl });
  await admin.connect();
  for (const name of Object.values(DATABASES)) await admin.query(`create database ${name}`);
  await admin.end();
  const aws = new URL(process.env.AWS_ENDPOINT_URL ?? "http://127.0.0.1:5000");
  const keycloak = new URL(process.env.KEYCLOAK_URL ?? "http://127.0.0.1:8081");
  const sqs = await startCuttableProxy({ host: aws.hostname, port: Number(aws.port) });
  const idp = await startCuttableProxy({ host: keycloak.hostname, port: Number(keycloak.port) });
  const urlOf = (db: string) => postgres.adminUrl.replace(/\/postgres$/, `/${db}`);
  const realm = `${idp.url}/realms/cgs`;
  const gatewayPort = await portBlock();
  const queuePrefix = `soak-${Date.now()}-`;
  let platform: LaunchedPlatform;
  try {
    platform = await launchPlatform({
      gatewayPort,
      servicePortBase: gatewayPort + 1,
      env: {
        ...fastJourneyEnv(queuePrefix),
        PRIVATE_NETWORK: "simulator",
        PLATFORM_RESTART_KILLED: "1",
        SESSION_MINUTE_MS: String(SOAK_MINUTE_MS),
        METERING_MINUTE_MS: String(SOAK_MINUTE_MS),
        SIMULATOR_AGENT_REPORT_INTERVAL_MS: "1000",
        // A deleted account is purged at once (its wallet closed, its sessions' data gone) rather than in 30 days.
        ACCOUNT_DELETION_GRACE_DAYS: "0",
        DELETION_SWEEP_INTERVAL_MS: "1000",
        // Players poll about once a second: the soak is about faults, not the per-account rate limits.
        RATE_LIMIT_POLL: "100000",
        RATE_LIMIT_READ: "100000",
        RATE_LIMIT_WRITE: "100000",
        RATE_LIMIT_WEBHOOK: "100000",
        PLATFORM_SERVICE_ENV: JSON.stringify({
          "*": {
            AWS_ENDPOINT_URL: sqs.url,
            OIDC_JWKS_URL: `${realm}/protocol/openid-connect/certs`,
            KEYCLOAK_URL: idp.url,
            // Refetch the JWKS at once after an outage: an unknown key id meets the IdP, not a cooldown.
            OIDC_JWKS_COOLDOWN_MS: "0",
          },
          gateway: { REDIS_URL: redis.url },
          sessions: { DATABASE_URL: urlOf(DATABASES.sessions) },
          billing: { DATABASE_URL: urlOf(DATABASES.billing) },
          accounts: { DATABASE_URL: urlOf(DATABASES.accounts) },
        }),
      },
    });
  } catch (err) {
    await Promise.allSettled([postgres.stop(), redis.stop(), sqs.close(), idp.close()]);
    throw err;
  }
  const portOf = (service: ServiceName) =>
    service === "gateway" ? gatewayPort : gatewayPort + 1 + SERVICES.indexOf(service);
  return {
    platform,
    postgres,
    redis,
    sqs,
    idp,
    base: platform.base,
    queuePrefix,
    portOf,
    async database(service) {
      const client = new Client({ connectionString: urlOf(DATABASES[service]) });
      await client.connect();
      return client;
    },
    async ready(service) {
      const path = service === "gateway" ? "/api/v1/health" : "/readyz";
      try {
        const res = await fetch(`http://127.0.0.1:${portOf(service)}${path}`, {
          signal: AbortSignal.timeout(2_000),
        });
        return res.ok;
      } catch {
        return false;
      }
    },
    async close() {
      await platform.cleanup();
      await Promise.allSettled([postgres.stop(), redis.stop(), sqs.close(), idp.close()]);
    },
  };
}
