import { ApiError, type AuthorizationServer, type Session } from "@cgs/sdk";

export const CLI_CLIENT_ID = "cgs-cli";

export interface DeviceAuthorization {
  deviceCode: string;
  userCode: string;
  verificationUri: string;
  verificationUriComplete: string | undefined;
  expiresIn: number;
  interval: number;
}

async function form(
  url: string,
  fields: Record<string, string>,
): Promise<{ status: number; body: Record<string, unknown> }> {
  let res: Response;
  try {
    res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
      body: new URLSearchParams(fields).toString(),
    });
  } catch (cause) {
    throw new ApiError({
      code: "NETWORK_ERROR",
      status: 0,
      message: `Could not reach the identity provider at ${url}`,
      cause,
    });
  }
  return { status: res.status, body: (await res.json().catch(() => ({}))) as Record<string, unknown> };
}

const oauthFailure = (what: string, status: number, body: Record<string, unknown>) =>
  new ApiError({
    code: typeof body.error === "string" ? body.error.toUpperCase() : `HTTP_${status}`,
    status,
    message: `${what}${typeof body.error_description === "string" ? `: ${body.error_description}` : ""}`,
  });

/** RFC 8628 §3.1-3.2: asks the identity provider for a device code and the code the user types. */
export async function requestDeviceCode(
  server: AuthorizationServer,
  clientId = CLI_CLIENT_ID,
): Promise<DeviceAuthorization> {
  if (!server.deviceAuthorizationEndpoint) {
    throw new ApiError({
      code: "DISCOVERY_FAILED",
      status: 0,
      message: `${server.issuer} offers no device sign-in`,
    });
  }
  const { status, body } = await form(server.deviceAuthorizationEndpoint, {
    client_id: clientId,
    scope: "openid",
  });
  if (status !== 200 || typeof body.device_code !== "string" || typeof body.user_code !== "string") {
    throw oauthFailure("The identity provider refused device sign-in", status, body);
  }
  return {
    deviceCode: body.device_code,
    userCode: body.user_code,
    verificationUri: String(body.verification_uri),
    verificationUriComplete:
      typeof body.verification_uri_complete === "string" ? body.verification_uri_complete : undefined,
    expiresIn: typeof body.expires_in === "number" ? body.expires_in : 600,
    interval: typeof body.interval === "number" ? body.interval : 5,
  };
}

/** RFC 8628 §3.4-3.5: polls the token endpoint at `interval`, slower on `slow_down`, until approved or refused. */
export async function pollForTokens(
  server: AuthorizationServer,
  device: DeviceAuthorization,
  clientId = CLI_CLIENT_ID,
  sleep: (ms: number) => Promise<void> = (ms) => new Promise((r) => setTimeout(r, ms)),
): Promise<Session> {
  let intervalMs = Math.max(1, device.interval) * 1000;
  const deadline = Date.now() + device.expiresIn * 1000;
  while (Date.now() < deadline) {
    await sleep(intervalMs);
    const { status, body } = await form(server.tokenEndpoint, {
      grant_type: "urn:ietf:params:oauth:grant-type:device_code",
      device_code: device.deviceCode,
      client_id: clientId,
    });
    if (status === 200 && typeof body.access_token === "string" && typeof body.refresh_token === "string") {
      return { accessToken: body.access_token, refreshToken: body.refresh_token };
    }
    if (body.error === "authorization_pending") continue;
    if (body.error === "slow_down") {
      intervalMs += 5_000;
      continue;
    }
    if (body.error === "access_denied")
      throw new ApiError({ code: "ACCESS_DENIED", status, message: "Sign-in was denied in the browser" });
    if (body.error === "expired_token") break;
    throw oauthFailure("Sign-in failed", status, body);
  }
  throw new ApiError({
    code: "EXPIRED_TOKEN",
    status: 400,
    message: "The sign-in code expired before it was approved; run `cgs login` again",
  });
}

/** Revokes a refresh token (RFC 7009); the client id is the one the token was issued to. */
export async function revokeToken(
  server: AuthorizationServer,
  refreshToken: string,
  clientId: string,
): Promise<void> {
  if (!server.revocationEndpoint) return;
  const { status, body } = await form(server.revocationEndpoint, {
    token: refreshToken,
    token_type_hint: "refresh_token",
    client_id: clientId,
  });
  if (status !== 200)
    throw oauthFailure("The identity provider refused to revoke the refresh token", status, body);
}
