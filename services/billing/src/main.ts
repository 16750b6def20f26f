import path from "node:path";
import { exitOnStartupFailure, runService, startEventWorkers, type Closer } from "@cgs/shared";
import { billingDeps, createApp, type BillingContext } from "./app";
import { billingConfigSchema } from "./config";
import * as schema from "./data/schema";
import { startBillingWorkers } from "./workers/billing-workers";

runService({
  name: "billing",
  configSchema: billingConfigSchema,
  schema,
  migrationsFolder: path.join(__dirname, "..", "drizzle"),
  buildApp: (context) => createApp(context),
  startWorkers: async (context: BillingContext): Promise<Closer[]> => {
    const deps = billingDeps(context, () => new Date());
    return startBillingWorkers(context, deps, startEventWorkers);
  },
}).catch(exitOnStartupFailure("billing"));
