import path from "node:path";
import { exitOnStartupFailure, runService } from "@cgs/shared";
import { composeAccounts } from "./composition";
import { accountsConfigSchema } from "./config";
import * as schema from "./data/schema";

runService({
  name: "accounts",
  configSchema: accountsConfigSchema,
  schema,
  migrationsFolder: path.join(__dirname, "..", "drizzle"),
  compose: (context) => composeAccounts(context),
}).catch(exitOnStartupFailure("accounts"));
