import { commonServiceEnv, databaseEnv } from "@cgs/shared";
import { z } from "zod";

export const authProxyConfigSchema = z.object({
  ...commonServiceEnv(8104),
  ...databaseEnv(),
});

export type AuthProxyConfig = z.output<typeof authProxyConfigSchema>;
