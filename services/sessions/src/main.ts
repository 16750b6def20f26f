import path from "node:path";
import { exitOnStartupFailure, runService } from "@cgs/shared";
import { composeSessions } from "./composition";
import { sessionsConfigSchema } from "./config";
import * as schema from "./data/schema";

runService({
  name: "sessions",
  configSchema: sessionsConfigSchema,
  schema,
  migrationsFolder: path.join(__dirname, "..", "drizzle"),
  compose: composeSessions,
}).catch(exitOnStartupFailure("sessions"));
