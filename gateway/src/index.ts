/**
 * @cgs/gateway's public entry, for what runs the gateway in-process (other workspaces' harnesses and tests):
 * build its config, its upstream pool and replica count, and the request listener. Everything else is internal.
 */
export {
  createApp as createGatewayApp,
  createGatewayUpstreamPool,
  replicaCountFromConfig,
  type GatewayDeps,
} from "./app";
export { gatewayEnvSchema, loadGatewayConfig, type GatewayConfig } from "./config";
export type { RedisCommandSender } from "./http/rate-limit-middleware";
