import path from "node:path";
import { exitOnStartupFailure, runService } from "@cgs/shared";
import { createApp } from "./app";
import { authProxyConfigSchema } from "./config";
import * as schema from "./data/schema";

runService({
  name: "auth-proxy",
  configSchema: authProxyConfigSchema,
  schema,
  migrationsFolder: path.join(__dirname, "..", "drizzle"),
  buildApp: createApp,
}).catch(exitOnStartupFailure("auth-proxy"));
