import { AppError } from "@cgs/shared";

export interface AccountStatus {
  identityUserId: string;
  pendingDeletion: boolean;
  purgeAt: string | null;
}

/** The accounts service's internal view of the caller's account. */
export interface AccountsClient {
  getMyAccount(accessToken: string): Promise<AccountStatus>;
}

/** GET {ACCOUNTS_URL}/internal/v1/accounts/me with the caller's own bearer token; any failure is 503. */
export function createHttpAccountsClient(baseUrl: string, timeoutMs: number): AccountsClient {
  return {
    async getMyAccount(accessToken) {
      let response: Response;
      try {
        response = await fetch(`${baseUrl}/internal/v1/accounts/me`, {
          headers: { authorization: `Bearer ${accessToken}`, accept: "application/json" },
          signal: AbortSignal.timeout(timeoutMs),
        });
      } catch {
        throw AppError.unavailable("The accounts service is unavailable", 5);
      }
      if (!response.ok) {
        await response.body?.cancel().catch(() => undefined);
        throw AppError.unavailable("The accounts service is unavailable", 5);
      }
      const body = (await response.json().catch(() => undefined)) as Partial<AccountStatus> | undefined;
      if (!body || typeof body.pendingDeletion !== "boolean") {
        throw AppError.unavailable("The accounts service gave an unexpected answer", 5);
      }
      return {
        identityUserId: String(body.identityUserId ?? ""),
        pendingDeletion: body.pendingDeletion,
        purgeAt: body.purgeAt ?? null,
      };
    },
  };
}
