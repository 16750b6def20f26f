import { commonServiceEnv, databaseEnv } from "@cgs/shared";
import { z } from "zod";

export const sessionsConfigSchema = z.object({
  ...commonServiceEnv(8101),
  ...databaseEnv(),
});

export type SessionsConfig = z.output<typeof sessionsConfigSchema>;
