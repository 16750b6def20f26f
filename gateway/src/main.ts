import { createClient } from "redis";
import {
  ConfigError,
  createJwtVerifier,
  createLogger,
  oidcSettings,
  startMetricsServer,
  startServer,
  stopOnSignals,
  takeOverHttpServerSpans,
} from "@cgs/shared";
import { createApp, createGatewayUpstreamPool, replicaCountFromConfig } from "./app";
import { loadGatewayConfig, type GatewayConfig } from "./config";
import { withTimeout } from "./http/redis-rate-limit-store";

async function main(): Promise<void> {
  let config: GatewayConfig;
  try {
    config = loadGatewayConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
  // The gateway makes its own server span per request (app.ts, withServerSpans) instead of patching node:http.
  takeOverHttpServerSpans();
  const logger = createLogger({
    name: "gateway",
    level: config.LOG_LEVEL,
    base: { version: config.APP_VERSION },
  });

  // disableOfflineQueue: while Redis is down, limiter calls fail at once (and count locally) instead of queueing.
  const redis = config.REDIS_URL
    ? createClient({
        url: config.REDIS_URL,
        disableOfflineQueue: true,
        socket: { connectTimeout: 2_000 },
        pingInterval: 5_000,
      })
    : undefined;
  if (redis) {
    redis.on("error", (err: unknown) => logger.warn({ err }, "redis error"));
    // Not awaited: the gateway starts and serves (with per-replica limits) while Redis is still unreachable.
    redis.connect().catch((err: unknown) => logger.warn({ err }, "redis connect failed"));
  }
  const metricsServer = await startMetricsServer({
    service: "gateway",
    port: config.METRICS_PORT,
    host: config.HOST,
    logger,
  });
  const upstreamPool = createGatewayUpstreamPool(config);
  const replicas = replicaCountFromConfig(config, logger);

  const app = createApp({
    config,
    logger,
    verifier: createJwtVerifier(oidcSettings(config)),
    redis: redis ? { sendCommand: (args) => redis.sendCommand(args) } : undefined,
    upstreamPool,
    replicas,
  });
  const running = await startServer(app, {
    port: config.PORT,
    host: config.HOST,
    logger,
    shutdownGraceMs: config.SHUTDOWN_GRACE_MS,
    // Above typical load-balancer idle timeouts (60 s) so the LB never reuses a socket we just closed.
    keepAliveTimeoutMs: 65_000,
    onClose: [
      () => upstreamPool.destroy(),
      () => replicas.close(),
      async () => {
        if (!redis?.isOpen) return;
        // quit() waits for Redis's answer: while Redis is unreachable (the client reconnecting) or hung it would
        // wait forever, and the process would never exit. Past the command timeout the connection is dropped.
        try {
          if (!redis.isReady) throw new Error("redis is not connected");
          await withTimeout(redis.quit(), config.REDIS_COMMAND_TIMEOUT_MS);
        } catch {
          if (redis.isOpen) await redis.disconnect().catch(() => undefined);
        }
      },
      () => metricsServer.close(),
    ],
  });
  stopOnSignals(running, logger);
}

main().catch((err: unknown) => {
  process.stderr.write(
    `gateway failed to start: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exit(1);
});
