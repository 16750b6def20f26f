import path from "node:path";
import { exitOnStartupFailure, runService } from "@cgs/shared";
import { createApp } from "./app";
import { accountsConfigSchema } from "./config";
import * as schema from "./data/schema";

runService({
  name: "accounts",
  configSchema: accountsConfigSchema,
  schema,
  migrationsFolder: path.join(__dirname, "..", "drizzle"),
  buildApp: createApp,
}).catch(exitOnStartupFailure("accounts"));
