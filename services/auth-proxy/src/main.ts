import path from "node:path";
import { exitOnStartupFailure, runService } from "@cgs/shared";
import { composeAuthProxy } from "./composition";
import { authProxyConfigSchema } from "./config";
import * as schema from "./data/schema";

runService({
  name: "auth-proxy",
  configSchema: authProxyConfigSchema,
  schema,
  migrationsFolder: path.join(__dirname, "..", "drizzle"),
  compose: (context) => composeAuthProxy(context),
}).catch(exitOnStartupFailure("auth-proxy"));
