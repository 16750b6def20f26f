/**
 * @cgs/sessions's public entry: its configuration schema (the configuration reference is generated from it), and
 * what a streaming instance is held to (the streaming image's boot test): the user data it is launched with, the
 * client the service talks to its Sunshine with, and how a claimed pool instance is handed its session.
 */
export { sessionsConfigSchema, type SessionsConfig } from "./config";
export { streamingUserData } from "./adapters/ec2-cloud-provider";
export { SunshineStreamingHost } from "./adapters/streaming-host";
export { HttpsHostAssigner, type AssignTarget } from "./adapters/host-assigner";
export type { LaunchRequest, PoolLaunchRequest } from "./adapters/cloud-provider";
