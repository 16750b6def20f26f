import path from "node:path";
import { exitOnStartupFailure, runService } from "@cgs/shared";
import { createApp, type SessionsAppDeps, type SessionsContext } from "./app";
import { buildAdapters, startSessionsWorkers } from "./composition";
import { sessionsConfigSchema } from "./config";
import * as schema from "./data/schema";

// One set of adapters per process, shared by the HTTP app and the workers (the simulators hold state).
let adapters: SessionsAppDeps | undefined;
const adaptersFor = (context: SessionsContext) =>
  (adapters ??= buildAdapters(context.config, context.database.db));

runService({
  name: "sessions",
  configSchema: sessionsConfigSchema,
  schema,
  migrationsFolder: path.join(__dirname, "..", "drizzle"),
  buildApp: (context) => createApp(context, adaptersFor(context)),
  startWorkers: (context) =>
    startSessionsWorkers(
      { ...adaptersFor(context), db: context.database.db, config: context.config, logger: context.logger },
      context.database,
    ),
}).catch(exitOnStartupFailure("sessions"));
