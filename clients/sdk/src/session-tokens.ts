import type { AuthorizationServer } from "./discovery";
import { ApiError, SessionExpiredError } from "./errors";
import { decodeJwt, isExpired } from "./jwt";

/** An access token with the refresh token that renews it. Refresh tokens rotate: each is good for one refresh. */
export interface Session {
  accessToken: string;
  refreshToken: string;
}

/** Runs one refresh; a caller may wrap it (a file lock, picking up a pair another process already rotated). */
export type RefreshRunner = (
  current: Session,
  refresh: (session: Session) => Promise<Session>,
) => Promise<Session>;

/** The default bound on one refresh (discovery and token call): far below the CLI's 60 s stale-lock age. */
export const DEFAULT_REFRESH_TIMEOUT_MS = 15_000;

const timedOut = (server: AuthorizationServer, signal: AbortSignal, timeoutMs: number, cause?: unknown) =>
  signal.aborted
    ? new ApiError({
        code: "UNAVAILABLE",
        status: 0,
        message: `The identity provider at ${server.tokenEndpoint} did not answer a refresh within ${Math.round(timeoutMs / 1000)} s; try again shortly`,
        cause,
      })
    : undefined;

/**
 * Trades a refresh token for a new pair at the token endpoint; the client id is the access token's `azp`. Gives up
 * after `timeoutMs` (request and answer), so a caller holding a lock around it never holds it past that.
 */
export async function refreshSession(
  session: Session,
  server: AuthorizationServer,
  fetchImpl: typeof fetch,
  timeoutMs = DEFAULT_REFRESH_TIMEOUT_MS,
): Promise<Session> {
  const clientId = decodeJwt(session.accessToken)?.azp;
  if (!clientId) throw new SessionExpiredError("the access token names no client (azp)");
  const signal = AbortSignal.timeout(timeoutMs);
  let res: Response;
  try {
    res = await fetchImpl(server.tokenEndpoint, {
      signal,
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
      body: new URLSearchParams({
        grant_type: "refresh_token",
        refresh_token: session.refreshToken,
        client_id: clientId,
      }).toString(),
    });
  } catch (cause) {
    throw (
      timedOut(server, signal, timeoutMs, cause) ??
      new ApiError({
        code: "NETWORK_ERROR",
        status: 0,
        message: `Could not reach the identity provider at ${server.tokenEndpoint} to refresh the session`,
        cause,
      })
    );
  }
  let body: Record<string, unknown> = {};
  try {
    body = (await res.json()) as Record<string, unknown>;
  } catch (cause) {
    // A body that is not JSON reads as empty; one that stops arriving is the timeout.
    const late = timedOut(server, signal, timeoutMs, cause);
    if (late) throw late;
  }
  if (res.status === 400 || res.status === 401) {
    const reason = [body.error, body.error_description].filter((v) => typeof v === "string").join(": ");
    throw new SessionExpiredError(
      `the identity provider refused the refresh token${reason ? `: ${reason}` : ""}`,
    );
  }
  if (!res.ok || typeof body.access_token !== "string") {
    throw new ApiError({
      code: "UNAVAILABLE",
      status: res.status,
      message: `The identity provider answered HTTP ${res.status} to a refresh; try again shortly`,
    });
  }
  return {
    accessToken: body.access_token,
    // Rotation: the old refresh token is dead now; keep it only if the IdP did not issue a new one.
    refreshToken: typeof body.refresh_token === "string" ? body.refresh_token : session.refreshToken,
  };
}

/**
 * Holds the current pair. Refreshes single-flight: concurrent calls that find the token expired (or get a 401)
 * share one refresh, so a rotated refresh token is used exactly once.
 */
export class SessionTokens {
  private current: Session;
  private inFlight: Promise<Session> | undefined;

  constructor(
    session: Session,
    private readonly refresh: (session: Session) => Promise<Session>,
    private readonly onChange: ((session: Session) => void | Promise<void>) | undefined,
    private readonly runner: RefreshRunner,
  ) {
    this.current = { ...session };
  }

  get session(): Session {
    return { ...this.current };
  }

  /** A usable access token, refreshing first when it has expired. */
  async accessToken(): Promise<string> {
    if (this.inFlight) return (await this.inFlight).accessToken;
    if (isExpired(this.current.accessToken)) return (await this.renew(this.current.accessToken)).accessToken;
    return this.current.accessToken;
  }

  /** After a 401 with `rejected`: refresh unless someone already replaced that token. */
  async renew(rejected: string): Promise<Session> {
    if (this.inFlight) return this.inFlight;
    if (this.current.accessToken !== rejected) return this.current;
    this.inFlight = (async () => {
      try {
        const previous = this.current;
        const next = await this.runner(previous, this.refresh);
        this.current = { ...next };
        const changed =
          next.accessToken !== previous.accessToken || next.refreshToken !== previous.refreshToken;
        if (changed) await this.onChange?.({ ...next });
        return next;
      } finally {
        this.inFlight = undefined;
      }
    })();
    return this.inFlight;
  }
}
