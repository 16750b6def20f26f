import { AppError } from "../errors";
import { z } from "zod";
import { callInternal } from "./internal-http";

const accountStatusSchema = z.object({
  identityUserId: z.string(),
  pendingDeletion: z.boolean(),
  purgeAt: z.string().nullable(),
  preferences: z
    .object({
      region: z.string().optional(),
      idleTimeoutMinutes: z.number().int().positive().optional(),
      maxSessionLengthMinutes: z.number().int().positive().optional(),
    })
    .passthrough(),
});

export type AccountStatus = z.infer<typeof accountStatusSchema>;

export interface AccountsClient {
  /** The caller's account status and preferences (accounts' GET /internal/v1/accounts/me). */
  getStatus(accessToken: string): Promise<AccountStatus>;
}

export function createAccountsClient(settings: { baseUrl: string; timeoutMs: number }): AccountsClient {
  return {
    async getStatus(accessToken) {
      const res = await callInternal("accounts", `${settings.baseUrl}/internal/v1/accounts/me`, {
        method: "GET",
        token: accessToken,
        timeoutMs: settings.timeoutMs,
      });
      const parsed = accountStatusSchema.safeParse(res.body);
      if (res.status !== 200 || !parsed.success) {
        throw AppError.unavailable("The accounts service gave an unexpected answer, try again shortly");
      }
      return parsed.data;
    },
  };
}
