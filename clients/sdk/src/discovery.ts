import { ApiError } from "./errors";

export interface AuthorizationServer {
  issuer: string;
  tokenEndpoint: string;
  revocationEndpoint: string | undefined;
  deviceAuthorizationEndpoint: string | undefined;
}

async function getJson(fetchImpl: typeof fetch, url: string, what: string): Promise<Record<string, unknown>> {
  let res: Response;
  try {
    res = await fetchImpl(url, { headers: { accept: "application/json" } });
  } catch (cause) {
    throw new ApiError({
      code: "NETWORK_ERROR",
      status: 0,
      message: `Could not reach ${url} (${what})`,
      cause,
    });
  }
  if (!res.ok) {
    throw new ApiError({
      code: res.status === 429 ? "RATE_LIMITED" : "DISCOVERY_FAILED",
      status: res.status,
      message: `${what} at ${url} answered HTTP ${res.status}`,
    });
  }
  return (await res.json()) as Record<string, unknown>;
}

/**
 * RFC 9728 then OpenID discovery: the gateway names its authorization server, whose configuration names the
 * token, revocation and device-authorization endpoints.
 */
export async function discoverAuthorizationServer(
  baseUrl: string,
  fetchImpl: typeof fetch,
): Promise<AuthorizationServer> {
  const resource = await getJson(
    fetchImpl,
    `${baseUrl}/.well-known/oauth-protected-resource`,
    "protected resource metadata",
  );
  const servers = resource.authorization_servers;
  const issuer = Array.isArray(servers) && typeof servers[0] === "string" ? servers[0] : undefined;
  if (!issuer) {
    throw new ApiError({
      code: "DISCOVERY_FAILED",
      status: 0,
      message: `${baseUrl} names no authorization server in its protected resource metadata`,
    });
  }
  const config = await getJson(
    fetchImpl,
    `${issuer.replace(/\/+$/, "")}/.well-known/openid-configuration`,
    "OpenID configuration",
  );
  if (typeof config.token_endpoint !== "string") {
    throw new ApiError({
      code: "DISCOVERY_FAILED",
      status: 0,
      message: `${issuer} publishes no token endpoint`,
    });
  }
  const optional = (v: unknown) => (typeof v === "string" ? v : undefined);
  return {
    issuer,
    tokenEndpoint: config.token_endpoint,
    revocationEndpoint: optional(config.revocation_endpoint),
    deviceAuthorizationEndpoint: optional(config.device_authorization_endpoint),
  };
}
