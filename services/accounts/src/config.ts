import { commonServiceEnv, databaseEnv } from "@cgs/shared";
import { z } from "zod";

export const accountsConfigSchema = z.object({
  ...commonServiceEnv(8103),
  ...databaseEnv(),
});

export type AccountsConfig = z.output<typeof accountsConfigSchema>;
