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
}

export interface OidcClient {
  authorizationUrl(params: { state: string; challenge: string; redirectUri: string }): Promise<string>;
  /** Exchanges the code (with the PKCE verifier) for an access token; throws on any failure. */
  exchangeCode(params: { code: string; verifier: string; redirectUri: string }): Promise<string>;
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
      return { authorization_endpoint: doc.authorization_endpoint, token_endpoint: doc.token_endpoint };
    })();
    endpoints.catch(() => {
      endpoints = undefined;
    });
    return endpoints;
  };

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
      const res = await fetch((await discover()).token_endpoint, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({
          grant_type: "authorization_code",
          code,
          redirect_uri: redirectUri,
          client_id: options.clientId,
          code_verifier: verifier,
        }),
        signal: AbortSignal.timeout(timeoutMs),
      });
      if (!res.ok) throw new Error(`code exchange failed with HTTP ${res.status}`);
      const body = (await res.json()) as { access_token?: string };
      if (!body.access_token) throw new Error("code exchange answered no access_token");
      return body.access_token;
    },
  };
}
