import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";

/** What the login-state cookie carries between /login/start and /login/callback. */
export interface LoginState {
  state: string;
  verifier: string;
  /** Epoch ms after which the callback is refused. */
  expiresAt: number;
}

const b64url = (buf: Buffer | string) => Buffer.from(buf).toString("base64url");

export function newLoginState(ttlMs: number, now = Date.now()): LoginState {
  return { state: b64url(randomBytes(24)), verifier: b64url(randomBytes(48)), expiresAt: now + ttlMs };
}

/** PKCE S256: base64url(sha256(verifier)). */
export function codeChallenge(verifier: string): string {
  return b64url(createHash("sha256").update(verifier).digest());
}

/** `<payload>.<hmac>`: HttpOnly anyway, signed so the callback only trusts what /login/start wrote. */
export function sealLoginState(state: LoginState, secret: string): string {
  const payload = b64url(JSON.stringify(state));
  const mac = b64url(createHmac("sha256", secret).update(payload).digest());
  return `${payload}.${mac}`;
}

export function openLoginState(
  value: string | undefined,
  secret: string,
  now = Date.now(),
): LoginState | null {
  if (!value) return null;
  const [payload, mac] = value.split(".");
  if (!payload || !mac) return null;
  const expected = createHmac("sha256", secret).update(payload).digest();
  const given = Buffer.from(mac, "base64url");
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
  try {
    const state = JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as LoginState;
    if (typeof state.state !== "string" || typeof state.verifier !== "string") return null;
    if (typeof state.expiresAt !== "number" || state.expiresAt < now) return null;
    return state;
  } catch {
    return null;
  }
}

export interface OidcEndpoints {
  authorization_endpoint: string;
  token_endpoint: string;
  /** RP-initiated logout; with a refresh token it ends the identity provider's session server-side. */
  end_session_endpoint?: string;
}

/** What the token endpoint answered (code exchange or refresh). */
export interface OidcTokens {
  accessToken: string;
  /** Absent when the provider issues none (then the browser session ends with the access token). */
  refreshToken?: string;
  /** Seconds the refresh token stays usable (Keycloak's refresh_expires_in: the SSO idle timeout). */
  refreshExpiresIn?: number;
}

/** The identity provider refused the refresh token (expired, revoked, session ended): sign the browser out. */
export class RefreshRejectedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "RefreshRejectedError";
  }
}

export interface OidcClient {
  authorizationUrl(params: { state: string; challenge: string; redirectUri: string }): Promise<string>;
  /** Exchanges the code (with the PKCE verifier) for tokens; throws on any failure. */
  exchangeCode(params: { code: string; verifier: string; redirectUri: string }): Promise<OidcTokens>;
  /**
   * grant_type=refresh_token. Throws RefreshRejectedError when the provider refuses the token (HTTP 400/401),
   * any other error when it cannot be reached or fails.
   */
  refresh(refreshToken: string): Promise<OidcTokens>;
  /** Ends the provider's session the refresh token belongs to (which also revokes the token); best effort. */
  logout(refreshToken: string): Promise<void>;
}

interface TokenResponse {
  access_token?: string;
  refresh_token?: string;
  refresh_expires_in?: number;
}

function toTokens(body: TokenResponse, what: string): OidcTokens {
  if (!body.access_token) throw new Error(`${what} answered no access_token`);
  return {
    accessToken: body.access_token,
    refreshToken: body.refresh_token || undefined,
    refreshExpiresIn: typeof body.refresh_expires_in === "number" ? body.refresh_expires_in : undefined,
  };
}

/** The portal's public OIDC client: endpoints from the issuer's discovery document, fetched once. */
export function createOidcClient(options: {
  issuer: string;
  clientId: string;
  timeoutMs?: number;
}): OidcClient {
  const timeoutMs = options.timeoutMs ?? 5_000;
  let endpoints: Promise<OidcEndpoints> | undefined;
  const discover = (): Promise<OidcEndpoints> => {
    endpoints ??= (async () => {
      const res = await fetch(`${options.issuer}/.well-known/openid-configuration`, {
        signal: AbortSignal.timeout(timeoutMs),
      });
      if (!res.ok) throw new Error(`OIDC discovery failed with HTTP ${res.status}`);
      const doc = (await res.json()) as Partial<OidcEndpoints>;
      if (!doc.authorization_endpoint || !doc.token_endpoint) throw new Error("OIDC discovery is incomplete");
      return {
        authorization_endpoint: doc.authorization_endpoint,
        token_endpoint: doc.token_endpoint,
        end_session_endpoint: doc.end_session_endpoint,
      };
    })();
    endpoints.catch(() => {
      endpoints = undefined;
    });
    return endpoints;
  };
  const post = async (url: string, form: Record<string, string>) =>
    fetch(url, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ ...form, client_id: options.clientId }),
      signal: AbortSignal.timeout(timeoutMs),
    });

  return {
    async authorizationUrl({ state, challenge, redirectUri }) {
      const url = new URL((await discover()).authorization_endpoint);
      url.search = new URLSearchParams({
        response_type: "code",
        client_id: options.clientId,
        redirect_uri: redirectUri,
        scope: "openid email",
        state,
        code_challenge: challenge,
        code_challenge_method: "S256",
      }).toString();
      return url.toString();
    },
    async exchangeCode({ code, verifier, redirectUri }) {
      const res = await post((await discover()).token_endpoint, {
        grant_type: "authorization_code",
        code,
        redirect_uri: redirectUri,
        code_verifier: verifier,
      });
      if (!res.ok) throw new Error(`code exchange failed with HTTP ${res.status}`);
      return toTokens((await res.json()) as TokenResponse, "code exchange");
    },
    async refresh(refreshToken) {
      const res = await post((await discover()).token_endpoint, {
        grant_type: "refresh_token",
        refresh_token: refreshToken,
      });
      if (res.status === 400 || res.status === 401) {
        const body = (await res.json().catch(() => ({}))) as { error?: string };
        throw new RefreshRejectedError(`refresh refused: ${body.error ?? `HTTP ${res.status}`}`);
      }
      if (!res.ok) throw new Error(`refresh failed with HTTP ${res.status}`);
      return toTokens((await res.json()) as TokenResponse, "refresh");
    },
    async logout(refreshToken) {
      const endpoint = (await discover()).end_session_endpoint;
      if (!endpoint) return;
      const res = await post(endpoint, { refresh_token: refreshToken });
      await res.body?.cancel();
      if (!res.ok && res.status !== 400) throw new Error(`logout failed with HTTP ${res.status}`);
    },
  };
}
