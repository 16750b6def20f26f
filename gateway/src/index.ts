export { createApp, createGatewayUpstreamPool, upstreamsFromConfig, type GatewayDeps } from "./app";
export { gatewayEnvSchema, loadGatewayConfig, type GatewayConfig } from "./config";
export {
  buildRouteTable,
  GATEWAY_LOCAL_PATHS,
  GATEWAY_OPERATIONS,
  type RouteEntry,
  type RouteTable,
  type UpstreamUrls,
} from "./http/route-table";
export { createRateLimiters, type RedisCommandSender } from "./http/rate-limit-middleware";
