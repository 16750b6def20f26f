import { commonServiceEnv, databaseEnv } from "@cgs/shared";
import { z } from "zod";

export const billingConfigSchema = z.object({
  ...commonServiceEnv(8102),
  ...databaseEnv(),
});

export type BillingConfig = z.output<typeof billingConfigSchema>;
