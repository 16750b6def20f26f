import path from "node:path";
import { exitOnStartupFailure, runService } from "@cgs/shared";
import { composeBilling } from "./composition";
import { billingConfigSchema } from "./config";
import * as schema from "./data/schema";

runService({
  name: "billing",
  configSchema: billingConfigSchema,
  schema,
  migrationsFolder: path.join(__dirname, "..", "drizzle"),
  compose: (context) => composeBilling(context),
}).catch(exitOnStartupFailure("billing"));
