import type { JwtVerifier } from "@cgs/shared";
import { bearerOf, startJsonServer, type HttpStandIn } from "./http-stand-in";

export interface AccountsStandIn extends HttpStandIn {
  /** Schedules (or cancels) deletion of an account: start must then answer ACCOUNT_PENDING_DELETION. */
  setPendingDeletion(accountId: string, pending: boolean): void;
  setPreferences(accountId: string, preferences: Record<string, unknown>): void;
}

const defaultPreferences = {
  resolution: "1920x1080",
  fps: 60,
  bitrateKbps: 20000,
  codec: "h264",
  region: "us-east-1",
  idleTimeoutMinutes: 15,
};

/**
 * A stand-in for accounts' GET /internal/v1/accounts/me, honouring the contract in the services brief
 * ({identityUserId, pendingDeletion, purgeAt, preferences}) and verifying the forwarded JWT. Accounts is a
 * separate deployable; its own tests cover the real implementation.
 */
export async function startAccountsStandIn(options: { verifier: JwtVerifier }): Promise<AccountsStandIn> {
  const pending = new Set<string>();
  const preferences = new Map<string, Record<string, unknown>>();
  const server = await startJsonServer(async (req) => {
    let accountId: string;
    try {
      accountId = (await options.verifier.verify(bearerOf(req.headers) ?? "")).identityUserId;
    } catch {
      return { status: 401, body: { error: "UNAUTHENTICATED", message: "Missing or invalid bearer token" } };
    }
    if (req.method === "GET" && req.path === "/internal/v1/accounts/me") {
      const isPending = pending.has(accountId);
      return {
        status: 200,
        body: {
          identityUserId: accountId,
          pendingDeletion: isPending,
          purgeAt: isPending ? new Date(Date.now() + 30 * 86_400_000).toISOString() : null,
          preferences: { ...defaultPreferences, ...preferences.get(accountId) },
        },
      };
    }
    return { status: 404, body: { error: "NOT_FOUND", message: "Route not found" } };
  });
  return {
    ...server,
    setPendingDeletion: (accountId, isPending) => {
      if (isPending) pending.add(accountId);
      else pending.delete(accountId);
    },
    setPreferences: (accountId, prefs) => preferences.set(accountId, prefs),
  };
}
