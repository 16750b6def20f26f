import type { RequestListener } from "node:http";
import type { Express } from "express";
import type { Logger } from "pino";
import type { z } from "zod";
import { createJwtVerifier, type JwtVerifier } from "../auth";
import { ConfigError, loadConfig, oidcSettings, type CommonServiceConfig } from "../config";
import { openDatabase, type DatabaseSchema, type OpenedDatabase } from "../db";
import { createLogger, startServer, stopOnSignals, type Closer, type RunningServer } from "../http";
import { startMetricsServer } from "../metrics";

type ServiceConfig = CommonServiceConfig & { DATABASE_URL?: string; PGLITE_DATA_DIR?: string };

export interface ServiceContext<TConfig extends ServiceConfig, TSchema extends DatabaseSchema> {
  config: TConfig;
  logger: Logger;
  database: OpenedDatabase<TSchema>;
  verifier: JwtVerifier;
}

export interface ServiceDefinition<
  S extends z.ZodType<ServiceConfig, z.ZodTypeDef, unknown>,
  TSchema extends DatabaseSchema,
> {
  name: string;
  configSchema: S;
  schema: TSchema;
  migrationsFolder: string;
  /**
   * The service's composition root: builds its adapters, repositories and settings once and returns the app and
   * the starter of its background work, which share them. A service without one gives buildApp/startWorkers.
   */
  compose?(context: ServiceContext<z.output<S>, TSchema>): ComposedService;
  buildApp?(context: ServiceContext<z.output<S>, TSchema>): Express;
  /** Background work (consumers, relays, sweeps); the closers run on shutdown after the server drains. */
  startWorkers?(context: ServiceContext<z.output<S>, TSchema>): Promise<Closer[]> | Closer[];
}

export interface ComposedService {
  /** The app, or a listener in front of it that serves a hot route without Express (sessions' poll). */
  app: Express | RequestListener;
  workers?(): Promise<Closer[]> | Closer[];
}

/**
 * The composition root every service shares: config (fail fast), logger, its own database with migrations,
 * JWT verifier, the HTTP server, background workers, and a drain on SIGTERM/SIGINT.
 */
export async function runService<
  S extends z.ZodType<ServiceConfig, z.ZodTypeDef, unknown>,
  TSchema extends DatabaseSchema,
>(definition: ServiceDefinition<S, TSchema>, env: NodeJS.ProcessEnv = process.env): Promise<RunningServer> {
  let config: z.output<S>;
  try {
    config = loadConfig(definition.configSchema, env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${definition.name}: ${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
  const logger = createLogger({ name: definition.name, level: config.LOG_LEVEL });
  const database = await openDatabase({
    url: config.DATABASE_URL,
    pgliteDataDir: config.PGLITE_DATA_DIR,
    migrationsFolder: definition.migrationsFolder,
    schema: definition.schema,
    logger,
    applicationName: definition.name,
  });
  const context = { config, logger, database, verifier: createJwtVerifier(oidcSettings(config)) };
  const metricsServer = await startMetricsServer({
    service: definition.name,
    port: config.METRICS_PORT,
    host: config.HOST,
    logger,
  });
  const composed = definition.compose?.(context);
  const workers = (await (composed ? composed.workers?.() : definition.startWorkers?.(context))) ?? [];
  const app = composed?.app ?? definition.buildApp?.(context);
  if (!app) throw new Error(`${definition.name}: the service definition has neither compose nor buildApp`);
  const running = await startServer(app, {
    port: config.PORT,
    host: config.HOST,
    logger,
    shutdownGraceMs: config.SHUTDOWN_GRACE_MS,
    onClose: [...workers, () => database.close(), () => metricsServer.close()],
  });
  stopOnSignals(running, logger);
  return running;
}

export function exitOnStartupFailure(name: string): (err: unknown) => never {
  return (err) => {
    process.stderr.write(`${name} failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  };
}
