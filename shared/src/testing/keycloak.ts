import { execFileSync } from "node:child_process";
import { createHmac, randomBytes } from "node:crypto";
import { runningInCi } from "./ci";

/**
 * Keycloak test peer (test/peers): realm cgs, admin client cgs-admin, and cgs-test, the password-grant client that only
 * the local realm carries (the public cgs-cli client uses the device grant).
 */
export const keycloakTestSettings = {
  baseUrl: process.env.KEYCLOAK_URL || "http://127.0.0.1:8081",
  realm: "cgs",
  adminClientId: process.env.KEYCLOAK_ADMIN_CLIENT_ID || "cgs-admin",
  adminClientSecret: process.env.KEYCLOAK_ADMIN_CLIENT_SECRET || "cgs-admin-local-secret",
  testClientId: "cgs-test",
};

const realmUrl = () => `${keycloakTestSettings.baseUrl}/realms/${keycloakTestSettings.realm}`;
const adminUrl = () => `${keycloakTestSettings.baseUrl}/admin/realms/${keycloakTestSettings.realm}`;

/**
 * Whether the Keycloak peer answers, decided synchronously (so a suite can choose `describe` or `describe.skip` at
 * load time). In CI an unreachable Keycloak is an error, never a skip.
 */
export function keycloakReachableSync(
  env: NodeJS.ProcessEnv = process.env,
  baseUrl = keycloakTestSettings.baseUrl,
): boolean {
  const discovery = `${baseUrl}/realms/${keycloakTestSettings.realm}/.well-known/openid-configuration`;
  try {
    execFileSync(
      process.execPath,
      ["-e", `fetch(${JSON.stringify(discovery)}).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))`],
      { timeout: 5_000, stdio: "ignore" },
    );
    return true;
  } catch {
    if (runningInCi(env)) {
      throw new Error(
        `Keycloak is required in CI: ${discovery} does not answer (bash test/peers/up.sh keycloak)`,
      );
    }
    return false;
  }
}

/**
 * `describe` when the Keycloak peer answers. Without it: in CI the suite fails (this throws while the file
 * loads); elsewhere it is skipped, saying so on stderr and in every test's name.
 */
export function describeWithKeycloak(
  env: NodeJS.ProcessEnv = process.env,
  baseUrl = keycloakTestSettings.baseUrl,
): jest.Describe {
  if (keycloakReachableSync(env, baseUrl)) return describe;
  console.warn(
    `\n*** SKIPPING: Keycloak does not answer at ${baseUrl}. Start it with: bash test/peers/up.sh keycloak ***\n`,
  );
  return describe.skip;
}

export async function keycloakAvailable(): Promise<boolean> {
  try {
    const res = await fetch(`${realmUrl()}/.well-known/openid-configuration`, {
      signal: AbortSignal.timeout(2_000),
    });
    return res.ok;
  } catch {
    return false;
  }
}

async function adminToken(): Promise<string> {
  const res = await fetch(`${realmUrl()}/protocol/openid-connect/token`, {
    method: "POST",
    body: new URLSearchParams({
      grant_type: "client_credentials",
      client_id: keycloakTestSettings.adminClientId,
      client_secret: keycloakTestSettings.adminClientSecret,
    }),
  });
  if (!res.ok) throw new Error(`admin token: HTTP ${res.status} ${await res.text()}`);
  return ((await res.json()) as { access_token: string }).access_token;
}

/** Calls the realm's admin API as the cgs-admin service account; throws on an unexpected status. */
export async function keycloakAdmin(
  method: string,
  path: string,
  body?: unknown,
  expect: number[] = [200, 201, 204],
): Promise<Response> {
  const res = await fetch(`${adminUrl()}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${await adminToken()}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!expect.includes(res.status)) {
    throw new Error(`${method} ${path}: HTTP ${res.status} ${await res.text()}`);
  }
  return res;
}

export interface TestUser {
  id: string;
  email: string;
  password?: string;
  /** Base32-free raw TOTP secret (UTF-8) when the user was created with a second factor. */
  totpSecret?: string;
  remove(): Promise<void>;
}

export interface CreateTestUserOptions {
  /** Omit for a user without a password (social-only once a federated identity is linked). */
  password?: string;
  /** Give the user a TOTP second factor. */
  totp?: boolean;
  /** Link a social identity (the realm's `github` provider). */
  socialLink?: boolean;
}

export function uniqueEmail(prefix = "user"): string {
  return `${prefix}-${Date.now().toString(36)}-${randomBytes(4).toString("hex")}@example.com`;
}

/** Creates a realm user (e-mail as username) through the admin API; remove() deletes it. */
export async function createTestUser(email: string, options: CreateTestUserOptions = {}): Promise<TestUser> {
  const credentials: unknown[] = [];
  if (options.password) credentials.push({ type: "password", value: options.password, temporary: false });
  let totpSecret: string | undefined;
  if (options.totp) {
    totpSecret = randomBytes(10).toString("hex");
    credentials.push({
      type: "otp",
      userLabel: "test authenticator",
      secretData: JSON.stringify({ value: totpSecret }),
      credentialData: JSON.stringify({
        subType: "totp",
        digits: 6,
        counter: 0,
        period: 30,
        algorithm: "HmacSHA1",
      }),
    });
  }
  const res = await keycloakAdmin("POST", "/users", {
    username: email,
    email,
    emailVerified: true,
    enabled: true,
    firstName: "Test",
    lastName: "User",
    credentials,
  });
  const location = res.headers.get("location") ?? "";
  const id = location.slice(location.lastIndexOf("/") + 1);
  if (!id) throw new Error("user created without a location");
  if (options.socialLink) {
    await keycloakAdmin("POST", `/users/${id}/federated-identity/github`, {
      identityProvider: "github",
      userId: `gh-${id}`,
      userName: email,
    });
  }
  return {
    id,
    email,
    password: options.password,
    totpSecret,
    remove: async () => {
      await keycloakAdmin("DELETE", `/users/${id}`, undefined, [204, 404]);
    },
  };
}

/** RFC 6238 TOTP (HMAC-SHA1, 6 digits, 30 s) over the raw secret bytes Keycloak stores. */
export function totpCode(secret: string, at: number = Date.now()): string {
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(Math.floor(at / 30_000)));
  const mac = createHmac("sha1", Buffer.from(secret, "utf8")).update(counter).digest();
  const offset = mac[mac.length - 1]! & 0x0f;
  const value = (mac.readUInt32BE(offset) & 0x7fffffff) % 1_000_000;
  return value.toString().padStart(6, "0");
}

export interface PasswordGrantResult {
  status: number;
  accessToken?: string;
  refreshToken?: string;
  error?: string;
  errorDescription?: string;
}

/** Signs in with the local-only cgs-test client's direct grant (password, plus `totp` when the user has a second factor). */
export async function passwordGrant(
  username: string,
  password: string,
  extra: Record<string, string> = {},
): Promise<PasswordGrantResult> {
  const res = await fetch(`${realmUrl()}/protocol/openid-connect/token`, {
    method: "POST",
    body: new URLSearchParams({
      grant_type: "password",
      client_id: keycloakTestSettings.testClientId,
      username,
      password,
      scope: "openid",
      ...extra,
    }),
  });
  const body = (await res.json()) as Record<string, string>;
  return {
    status: res.status,
    accessToken: body.access_token,
    refreshToken: body.refresh_token,
    error: body.error,
    errorDescription: body.error_description,
  };
}

export async function refreshGrant(refreshToken: string): Promise<PasswordGrantResult> {
  const res = await fetch(`${realmUrl()}/protocol/openid-connect/token`, {
    method: "POST",
    body: new URLSearchParams({
      grant_type: "refresh_token",
      client_id: keycloakTestSettings.testClientId,
      refresh_token: refreshToken,
    }),
  });
  const body = (await res.json()) as Record<string, string>;
  return {
    status: res.status,
    accessToken: body.access_token,
    refreshToken: body.refresh_token,
    error: body.error,
  };
}

export async function getTestUser(id: string): Promise<{ enabled: boolean } | null> {
  const res = await keycloakAdmin("GET", `/users/${id}`, undefined, [200, 404]);
  if (res.status === 404) return null;
  return (await res.json()) as { enabled: boolean };
}

export async function bruteForceStatus(id: string): Promise<{ disabled: boolean; numFailures: number }> {
  const res = await keycloakAdmin("GET", `/attack-detection/brute-force/users/${id}`);
  return (await res.json()) as { disabled: boolean; numFailures: number };
}
