import path from "node:path";
import { exitOnStartupFailure, runService } from "@cgs/shared";
import { createApp } from "./app";
import { billingConfigSchema } from "./config";
import * as schema from "./data/schema";

runService({
  name: "billing",
  configSchema: billingConfigSchema,
  schema,
  migrationsFolder: path.join(__dirname, "..", "drizzle"),
  buildApp: createApp,
}).catch(exitOnStartupFailure("billing"));
