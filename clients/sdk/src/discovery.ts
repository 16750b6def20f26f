import { ApiError } from "./errors";
import { assertSecureUrl } from "./secure-url";

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

const trimSlash = (url: string) => url.replace(/\/+$/, "");

const refused = (message: string) => new ApiError({ code: "DISCOVERY_FAILED", status: 0, message });

/**
 * OpenID discovery at the issuer itself: its configuration names the token, revocation and device-authorization
 * endpoints. The document must name the same issuer (OpenID Connect Discovery §4.3), and every endpoint must be
 * https (plain http only on loopback), or nothing is returned.
 */
export async function discoverIssuer(issuer: string, fetchImpl: typeof fetch): Promise<AuthorizationServer> {
  assertSecureUrl(issuer, "The identity provider");
  const config = await getJson(
    fetchImpl,
    `${trimSlash(issuer)}/.well-known/openid-configuration`,
    "OpenID configuration",
  );
  if (typeof config.issuer !== "string" || trimSlash(config.issuer) !== trimSlash(issuer)) {
    throw refused(
      `The OpenID configuration of ${issuer} names another issuer (${String(config.issuer)}); refusing to use it`,
    );
  }
  if (typeof config.token_endpoint !== "string") throw refused(`${issuer} publishes no token endpoint`);
  const endpoint = (v: unknown, what: string) => {
    if (typeof v !== "string") return undefined;
    assertSecureUrl(v, `The ${what} endpoint of ${issuer}`);
    return v;
  };
  return {
    issuer: trimSlash(issuer),
    tokenEndpoint: endpoint(config.token_endpoint, "token")!,
    revocationEndpoint: endpoint(config.revocation_endpoint, "revocation"),
    deviceAuthorizationEndpoint: endpoint(config.device_authorization_endpoint, "device authorization"),
  };
}

/**
 * RFC 9728 then OpenID discovery: the API origin names its authorization server, whose own configuration names
 * the endpoints. Only for signing in: a session refreshes at the issuer recorded at sign-in (the client's
 * `issuer` option), never at one an API origin names later.
 */
export async function discoverAuthorizationServer(
  baseUrl: string,
  fetchImpl: typeof fetch,
): Promise<AuthorizationServer> {
  const resource = await getJson(
    fetchImpl,
    `${trimSlash(baseUrl)}/.well-known/oauth-protected-resource`,
    "protected resource metadata",
  );
  const servers = resource.authorization_servers;
  const issuer = Array.isArray(servers) && typeof servers[0] === "string" ? servers[0] : undefined;
  if (!issuer) throw refused(`${baseUrl} names no authorization server in its protected resource metadata`);
  return discoverIssuer(issuer, fetchImpl);
}
