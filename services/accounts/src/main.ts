import path from "node:path";
import { exitOnStartupFailure, runService } from "@cgs/shared";
import { createApp } from "./app";
import { accountsConfigSchema } from "./config";
import * as schema from "./data/schema";
import { startWorkers } from "./workers";

runService({
  name: "accounts",
  configSchema: accountsConfigSchema,
  schema,
  migrationsFolder: path.join(__dirname, "..", "drizzle"),
  buildApp: createApp,
  startWorkers: (context) => startWorkers(context),
}).catch(exitOnStartupFailure("accounts"));
