import path from "node:path";
import { exitOnStartupFailure, runService } from "@cgs/shared";
import { authProxyConfigSchema, type AuthProxyConfig } from "./config";
import { adaptersFromConfig, createAuthProxy } from "./composition";
import * as schema from "./data/schema";

let proxy: ReturnType<typeof createAuthProxy> | undefined;
const authProxy = (config: AuthProxyConfig) => (proxy ??= createAuthProxy(adaptersFromConfig(config)));

runService({
  name: "auth-proxy",
  configSchema: authProxyConfigSchema,
  schema,
  migrationsFolder: path.join(__dirname, "..", "drizzle"),
  startWorkers: (context) => authProxy(context.config).startWorkers(context),
  buildApp: (context) => authProxy(context.config).buildApp(context),
}).catch(exitOnStartupFailure("auth-proxy"));
