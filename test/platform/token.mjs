// `npm run --silent token -- [--session] <email>`: prints an access token for a local user of the platform's
// Keycloak realm, or with --session the pair `{"accessToken": …, "refreshToken": …}` an SDK session takes.
// The user is found or created through the cgs-admin service account (e-mail verified, enabled, a deterministic
// local password), then signed in with a password grant through cgs-test, a client that only the local realm
// carries (never configure it in production: the password grant skips second factors).
// Only the token goes to stdout, so `TOKEN=$(npm run --silent token -- you@example.com)` works.
import process from "node:process";

const baseUrl = (process.env.KEYCLOAK_URL ?? "http://127.0.0.1:8081").replace(/\/+$/, "");
const realm = process.env.KEYCLOAK_REALM ?? "cgs";
const adminClientId = process.env.KEYCLOAK_ADMIN_CLIENT_ID ?? "cgs-admin";
const adminClientSecret = process.env.KEYCLOAK_ADMIN_CLIENT_SECRET ?? "cgs-admin-local-secret";
const testClientId = process.env.KEYCLOAK_TEST_CLIENT_ID ?? "cgs-test";
const password = process.env.LOCAL_USER_PASSWORD ?? "local-dev-password";

class UsageError extends Error {}

function fail(message) {
  process.stderr.write(`token: ${message}\n`);
  process.exit(1);
}

async function call(url, init = {}) {
  try {
    return await fetch(url, { ...init, signal: AbortSignal.timeout(15_000) });
  } catch (err) {
    const reason = err instanceof Error ? (err.cause?.code ?? err.message) : String(err);
    throw new UsageError(
      `Keycloak is not reachable at ${baseUrl} (${reason}); start the platform with npm start`,
    );
  }
}

async function describe(res) {
  const text = await res.text();
  return `HTTP ${res.status}${text ? `: ${text.slice(0, 300)}` : ""}`;
}

async function tokenRequest(form) {
  return call(`${baseUrl}/realms/${realm}/protocol/openid-connect/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams(form),
  });
}

async function adminToken() {
  const res = await tokenRequest({
    grant_type: "client_credentials",
    client_id: adminClientId,
    client_secret: adminClientSecret,
  });
  if (res.status === 404) {
    throw new UsageError(`realm ${realm} not found at ${baseUrl}; start the platform with npm start`);
  }
  if (!res.ok) throw new UsageError(`admin client ${adminClientId} was refused: ${await describe(res)}`);
  return (await res.json()).access_token;
}

function adminApi(token) {
  return (path, init = {}) =>
    call(`${baseUrl}/admin/realms/${realm}${path}`, {
      ...init,
      headers: {
        authorization: `Bearer ${token}`,
        "content-type": "application/json",
        ...(init.headers ?? {}),
      },
    });
}

async function findUser(admin, email) {
  const res = await admin(`/users?exact=true&email=${encodeURIComponent(email)}`);
  if (!res.ok) throw new UsageError(`user lookup failed: ${await describe(res)}`);
  const users = await res.json();
  return users.find((u) => (u.email ?? "").toLowerCase() === email) ?? null;
}

async function createUser(admin, email) {
  const localPart = email.split("@")[0];
  const res = await admin("/users", {
    method: "POST",
    body: JSON.stringify({
      username: email,
      email,
      emailVerified: true,
      enabled: true,
      firstName: localPart,
      lastName: "Player",
      requiredActions: [],
      credentials: [{ type: "password", value: password, temporary: false }],
    }),
  });
  if (res.status !== 201 && res.status !== 409) {
    throw new UsageError(`could not create user ${email}: ${await describe(res)}`);
  }
  const user = await findUser(admin, email);
  if (!user) throw new UsageError(`user ${email} was created but cannot be found`);
  return user;
}

// A user made earlier (by a test, or with another password) is brought back to a state the password grant accepts.
async function repairUser(admin, user) {
  const update = await admin(`/users/${user.id}`, {
    method: "PUT",
    body: JSON.stringify({
      ...user,
      enabled: true,
      emailVerified: true,
      firstName: user.firstName || user.email.split("@")[0],
      lastName: user.lastName || "Player",
      requiredActions: [],
    }),
  });
  if (!update.ok) throw new UsageError(`could not update user ${user.email}: ${await describe(update)}`);
  await admin(`/attack-detection/brute-force/users/${user.id}`, { method: "DELETE" });
  const reset = await admin(`/users/${user.id}/reset-password`, {
    method: "PUT",
    body: JSON.stringify({ type: "password", value: password, temporary: false }),
  });
  // 400 from password history means the password already is the local one.
  if (!reset.ok && reset.status !== 400) {
    throw new UsageError(`could not set the local password for ${user.email}: ${await describe(reset)}`);
  }
}

async function passwordGrant(email) {
  return tokenRequest({
    grant_type: "password",
    client_id: testClientId,
    username: email,
    password,
    scope: "openid",
  });
}

async function main() {
  const args = process.argv.slice(2);
  const session = args.includes("--session");
  const raw = args.find((a) => !a.startsWith("--"));
  if (!raw || args.some((a) => a.startsWith("--") && a !== "--session")) {
    throw new UsageError("usage: npm run --silent token -- [--session] <email>");
  }
  const email = raw.trim().toLowerCase();
  if (!/^[^\s@]+@[^\s@]+\.[^\s@.]{2,}$/.test(email))
    throw new UsageError(`not a valid e-mail address: ${raw}`);
  if (password.length < 10) throw new UsageError("LOCAL_USER_PASSWORD must have at least 10 characters");

  const admin = adminApi(await adminToken());
  let user = await findUser(admin, email);
  if (!user) user = await createUser(admin, email);

  let res = await passwordGrant(email);
  if (!res.ok) {
    await repairUser(admin, user);
    res = await passwordGrant(email);
  }
  if (!res.ok) throw new UsageError(`sign-in for ${email} failed: ${await describe(res)}`);
  const { access_token: accessToken, refresh_token: refreshToken } = await res.json();
  process.stdout.write(session ? `${JSON.stringify({ accessToken, refreshToken })}\n` : `${accessToken}\n`);
}

main().catch((err) => fail(err instanceof UsageError ? err.message : (err?.stack ?? String(err))));
