import { commonServiceEnv, databaseEnv, envInt, identityAdminEnv, queueEnv } from "@cgs/shared";
import { z } from "zod";

export const accountsConfigSchema = z.object({
  ...commonServiceEnv(8103),
  ...databaseEnv(),
  ...queueEnv("cgs-accounts"),
  ...identityAdminEnv(),
  ACCOUNT_DELETION_GRACE_DAYS: envInt(30, 0).describe(
    "Days between an account deletion request and the purge (the spec's 30-day grace)",
  ),
  DELETION_SWEEP_INTERVAL_MS: envInt(60_000, 10).describe(
    "Pause between deletion sweeps (purging due accounts, disabling their identities), in ms",
  ),
  DELETION_SWEEP_BATCH_SIZE: envInt(50, 1).describe("Accounts purged per sweep transaction"),
});

export type AccountsConfig = z.output<typeof accountsConfigSchema>;
