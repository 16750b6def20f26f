import { z } from "zod";
import { envUrl } from "../config";

/** A user as the identity provider's admin API describes it. */
export interface IdentityUser {
  id: string;
  email?: string;
  enabled: boolean;
}

/** Why the identity provider refused a new password. */
export type PasswordRejection = "reused" | "policy";

export class PasswordRejectedError extends Error {
  constructor(
    readonly reason: PasswordRejection,
    detail: string,
  ) {
    super(`password rejected (${reason}): ${detail}`);
    this.name = "PasswordRejectedError";
  }
}

/** The user no longer exists in the identity provider. */
export class IdentityUserNotFoundError extends Error {
  constructor(userId: string) {
    super(`identity user ${userId} not found`);
    this.name = "IdentityUserNotFoundError";
  }
}

/** The identity provider did not answer, or answered something unexpected. */
export class IdentityProviderError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "IdentityProviderError";
  }
}

/** The user-administration operations the platform needs from its identity provider. */
export interface IdentityAdmin {
  findUserByEmail(email: string): Promise<IdentityUser | null>;
  /** When the user's current password was set; null without a password (social-only accounts). */
  passwordSetAt(userId: string): Promise<Date | null>;
  /** Sets a permanent password; throws PasswordRejectedError on a policy or history violation. */
  setPassword(userId: string, password: string): Promise<void>;
  /** Clears the failed-sign-in lockout. */
  clearLoginFailures(userId: string): Promise<void>;
  /** Disables the user and ends their sessions; a user that no longer exists counts as done. */
  disableUser(userId: string): Promise<void>;
}

export interface KeycloakAdminOptions {
  /** Keycloak base URL, e.g. http://127.0.0.1:8081. */
  baseUrl: string;
  realm: string;
  clientId: string;
  clientSecret: string;
  timeoutMs?: number;
  fetch?: typeof fetch;
}

/** Admin-API settings every process that administers users reads (Keycloak's layout). */
export const identityAdminEnv = () => ({
  KEYCLOAK_URL: envUrl()
    .optional()
    .describe("Keycloak base URL for the admin API; defaults to OIDC_ISSUER's origin"),
  KEYCLOAK_REALM: z
    .string()
    .min(1)
    .optional()
    .describe("Keycloak realm of the users; defaults to the realm in OIDC_ISSUER (/realms/<realm>)"),
  KEYCLOAK_ADMIN_CLIENT_ID: z
    .string()
    .min(1)
    .default("cgs-admin")
    .describe("Confidential client whose service account has realm-management manage-users"),
  KEYCLOAK_ADMIN_CLIENT_SECRET: z
    .string()
    .min(1)
    .optional()
    .describe("Secret of KEYCLOAK_ADMIN_CLIENT_ID; required in production (local default otherwise)"),
  IDENTITY_ADMIN_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(1)
    .default(5_000)
    .describe("Timeout of each identity-provider admin call, in ms"),
});

export const LOCAL_KEYCLOAK_ADMIN_SECRET = "cgs-admin-local-secret";

interface IdentityAdminConfig {
  NODE_ENV: "development" | "test" | "production";
  OIDC_ISSUER: string;
  KEYCLOAK_URL?: string;
  KEYCLOAK_REALM?: string;
  KEYCLOAK_ADMIN_CLIENT_ID: string;
  KEYCLOAK_ADMIN_CLIENT_SECRET?: string;
  IDENTITY_ADMIN_TIMEOUT_MS: number;
}

/** Admin-client options from a parsed config; throws when production lacks the client secret. */
export function keycloakAdminOptions(config: IdentityAdminConfig): KeycloakAdminOptions {
  const issuer = new URL(config.OIDC_ISSUER);
  const realmMatch = /\/realms\/([^/]+)\/?$/.exec(issuer.pathname);
  const realm = config.KEYCLOAK_REALM ?? (realmMatch ? decodeURIComponent(realmMatch[1]!) : undefined);
  if (!realm) throw new Error("KEYCLOAK_REALM is required when OIDC_ISSUER has no /realms/<realm> path");
  const baseUrl =
    config.KEYCLOAK_URL ?? `${issuer.origin}${issuer.pathname.replace(/\/realms\/[^/]+\/?$/, "")}`;
  if (!config.KEYCLOAK_ADMIN_CLIENT_SECRET && config.NODE_ENV === "production") {
    throw new Error("KEYCLOAK_ADMIN_CLIENT_SECRET is required in production");
  }
  return {
    baseUrl: baseUrl.replace(/\/+$/, ""),
    realm,
    clientId: config.KEYCLOAK_ADMIN_CLIENT_ID,
    clientSecret: config.KEYCLOAK_ADMIN_CLIENT_SECRET ?? LOCAL_KEYCLOAK_ADMIN_SECRET,
    timeoutMs: config.IDENTITY_ADMIN_TIMEOUT_MS,
  };
}

interface KeycloakUserRep {
  id: string;
  email?: string;
  enabled?: boolean;
}

/** IdentityAdmin over Keycloak's admin REST API, authenticated as a confidential client's service account. */
export function createKeycloakAdmin(options: KeycloakAdminOptions): IdentityAdmin {
  const doFetch = options.fetch ?? fetch;
  const timeoutMs = options.timeoutMs ?? 5_000;
  const admin = `${options.baseUrl}/admin/realms/${encodeURIComponent(options.realm)}`;
  const tokenUrl = `${options.baseUrl}/realms/${encodeURIComponent(options.realm)}/protocol/openid-connect/token`;
  let cached: { token: string; until: number } | undefined;
  let pending: Promise<string> | undefined;

  async function call(url: string, init: RequestInit = {}): Promise<Response> {
    try {
      return await doFetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
    } catch (err) {
      throw new IdentityProviderError(
        `identity provider unreachable: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
  }

  async function fetchToken(): Promise<string> {
    const res = await call(tokenUrl, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        grant_type: "client_credentials",
        client_id: options.clientId,
        client_secret: options.clientSecret,
      }),
    });
    if (!res.ok) throw new IdentityProviderError(`admin token request failed with HTTP ${res.status}`);
    const body = (await res.json()) as { access_token?: string; expires_in?: number };
    if (!body.access_token) throw new IdentityProviderError("admin token response has no access_token");
    // Renew well before expiry so a token never lapses mid-call.
    cached = {
      token: body.access_token,
      until: Date.now() + Math.max(5, (body.expires_in ?? 60) - 30) * 1000,
    };
    return body.access_token;
  }

  async function token(): Promise<string> {
    if (cached && cached.until > Date.now()) return cached.token;
    pending ??= fetchToken().finally(() => {
      pending = undefined;
    });
    return pending;
  }

  async function adminCall(path: string, init: RequestInit = {}): Promise<Response> {
    const send = async () =>
      call(`${admin}${path}`, {
        ...init,
        headers: { ...(init.headers as Record<string, string>), authorization: `Bearer ${await token()}` },
      });
    let res = await send();
    if (res.status === 401) {
      cached = undefined;
      res = await send();
    }
    return res;
  }

  async function expectOk(res: Response, what: string, allow404 = false): Promise<void> {
    if (res.ok || (allow404 && res.status === 404)) return;
    throw new IdentityProviderError(`${what} failed with HTTP ${res.status}`);
  }

  const userPath = (id: string) => `/users/${encodeURIComponent(id)}`;

  return {
    async findUserByEmail(email) {
      const query = new URLSearchParams({ email, exact: "true", briefRepresentation: "true" });
      const res = await adminCall(`/users?${query}`);
      await expectOk(res, "user search");
      const users = (await res.json()) as KeycloakUserRep[];
      const wanted = email.toLowerCase();
      const user = users.find((u) => (u.email ?? "").toLowerCase() === wanted);
      return user ? { id: user.id, email: user.email, enabled: user.enabled !== false } : null;
    },

    async passwordSetAt(userId) {
      const res = await adminCall(`${userPath(userId)}/credentials`);
      if (res.status === 404) return null;
      await expectOk(res, "credential listing");
      const credentials = (await res.json()) as Array<{ type?: string; createdDate?: number }>;
      const password = credentials.find((c) => c.type === "password");
      if (!password) return null;
      return new Date(password.createdDate ?? 0);
    },

    async setPassword(userId, password) {
      const res = await adminCall(`${userPath(userId)}/reset-password`, {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ type: "password", value: password, temporary: false }),
      });
      if (res.ok) return;
      if (res.status === 404) throw new IdentityUserNotFoundError(userId);
      const text = await res.text();
      if (res.status === 400) {
        const error = (() => {
          try {
            return (JSON.parse(text) as { error?: string }).error ?? "";
          } catch {
            return text;
          }
        })();
        if (/history/i.test(error)) throw new PasswordRejectedError("reused", error);
        throw new PasswordRejectedError("policy", error);
      }
      throw new IdentityProviderError(`password update failed with HTTP ${res.status}`);
    },

    async clearLoginFailures(userId) {
      const res = await adminCall(`/attack-detection/brute-force/users/${encodeURIComponent(userId)}`, {
        method: "DELETE",
      });
      await expectOk(res, "lockout reset", true);
    },

    async disableUser(userId) {
      const res = await adminCall(userPath(userId), {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ enabled: false }),
      });
      if (res.status === 404) return;
      await expectOk(res, "user disable");
      const logout = await adminCall(`${userPath(userId)}/logout`, { method: "POST" });
      await expectOk(logout, "user logout", true);
    },
  };
}
