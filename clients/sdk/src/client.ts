import createFetchClient from "openapi-fetch";
import { discoverAuthorizationServer, discoverIssuer, type AuthorizationServer } from "./discovery";
import { ApiError, SessionExpiredError } from "./errors";
import { decodeJwt } from "./jwt";
import { measureRegions, roundTripsById, type MeasuredRegion, type MeasureOptions } from "./region-latency";
import { assertSecureUrl } from "./secure-url";
import type { components, paths } from "./generated/openapi";
import {
  DEFAULT_REFRESH_TIMEOUT_MS,
  refreshSession,
  SessionTokens,
  type RefreshRunner,
  type Session,
} from "./session-tokens";
import { createTransport, defaultRetry, sleep, type RetryOptions } from "./transport";

type Schemas = components["schemas"];
export type SessionStatus = Schemas["SessionStatus"];
export type PairingPin = Schemas["PairingPin"];
export type ConnectInfo = Schemas["ConnectInfo"];
export type VpnKey = Schemas["VpnKey"];
export type CreditBalance = Schemas["CreditBalance"];
export type TopupCheckout = Schemas["TopupCheckout"];
export type StorageBilling = Schemas["StorageBilling"];
export type Preferences = Schemas["Preferences"];
export type PreferencesPatch = Schemas["PreferencesPatch"];
export type Identity = Schemas["Identity"];
export type AccountDeletion = Schemas["AccountDeletion"];
export type StartSessionRequest = Schemas["StartSessionRequest"];
export type Region = Schemas["Region"];
/** The place in line of a `queued` session. */
export type QueuePlace = NonNullable<SessionStatus["queue"]>;
/** An automatic stop poll is announcing (idle, maximum length, credit, a spending limit, a silent host). */
export type SessionWarning = NonNullable<SessionStatus["warning"]>;
export type StopReason = NonNullable<SessionStatus["stopReason"]>;
export type Device = Schemas["Device"];
export type AutoRecharge = Schemas["AutoRecharge"];
export type AutoRechargePatch = Schemas["AutoRechargePatch"];
export type SavedCard = NonNullable<Schemas["SavedCard"]>;
export type Recharge = NonNullable<Schemas["Recharge"]>;
export type CardSetupCheckout = Schemas["CardSetupCheckout"];
export type SpendLimits = Schemas["SpendLimits"];
export type SpendLimitsPatch = Schemas["SpendLimitsPatch"];
export type PairingRequest = Schemas["PairingRequest"];

/** The documented production origin (Pulumi.prod.yaml `cgs:domain`). */
export const DEFAULT_BASE_URL = "https://play.example.com";

export interface ClientOptions {
  /**
   * API origin. Default: `SERVICE_BASE_URL` (when the runtime has an environment), then {@link DEFAULT_BASE_URL}.
   * https, or plain http to loopback only (127.0.0.0/8, ::1, localhost); anything else throws a TypeError.
   */
  baseUrl?: string;
  /** A plain access token; no refresh. */
  apiKey?: string;
  /** An access token with its refresh token: refreshed on expiry or a 401, rotated pair handed to onSessionChange. */
  session?: Session;
  /** Called with every rotated pair; persist it, the previous refresh token no longer works. */
  onSessionChange?: (session: Session) => void | Promise<void>;
  /** The fetch to use (default: the global one). */
  fetch?: typeof fetch;
  retry?: RetryOptions;
  /** Wraps each refresh (the CLI holds a file lock around it); default runs it directly. */
  refreshRunner?: RefreshRunner;
  /**
   * The identity provider that issued the session (record it at sign-in). Refreshes go to its own OpenID
   * configuration's token endpoint only, never to an issuer the API origin names. Default: the session's access
   * token's `iss` claim; a session without either cannot be refreshed.
   */
  issuer?: string;
  /** Bound on one refresh, discovery included, in ms (default 15 000); past it the call rejects with UNAVAILABLE. */
  refreshTimeoutMs?: number;
}

export interface WaitOptions {
  /** Called after every poll with the status and the time waited so far. */
  onProgress?: (status: SessionStatus, elapsedMs: number) => void;
  signal?: AbortSignal;
  /** Give up after this long (default 10 minutes). */
  timeoutMs?: number;
  /** Time between polls; never below 2 000 ms so a wait stays within the poll limit of 30 per minute. */
  intervalMs?: number;
}

const MIN_POLL_INTERVAL_MS = 2_000;

function environmentBaseUrl(): string | undefined {
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env;
  return env?.SERVICE_BASE_URL || undefined;
}

const newIdempotencyKey = () => globalThis.crypto.randomUUID();

/** The identity provider's discovery, or UNAVAILABLE once `ms` have passed (the lookup may finish later). */
function withinTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(
      () =>
        reject(
          new ApiError({
            code: "UNAVAILABLE",
            status: 0,
            message: `The identity provider's configuration did not arrive within ${Math.round(ms / 1000)} s; try again shortly`,
          }),
        ),
      ms,
    );
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}

/** Creates the API client. Every call resolves with the response body or rejects with an {@link ApiError}. */
export function createClient(options: ClientOptions = {}) {
  if (options.apiKey && options.session) throw new TypeError("pass apiKey or session, not both");
  const baseUrl = (options.baseUrl ?? environmentBaseUrl() ?? DEFAULT_BASE_URL).replace(/\/+$/, "");
  assertSecureUrl(baseUrl, "The API base URL");
  const fetchImpl: typeof fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  // A session refreshes where it was issued: the recorded issuer, else its token's own `iss`.
  const sessionIssuer =
    options.issuer ?? (options.session ? decodeJwt(options.session.accessToken)?.iss : undefined);
  if (sessionIssuer) assertSecureUrl(sessionIssuer, "The identity provider (issuer)");

  let discovery: Promise<AuthorizationServer> | undefined;
  const authorizationServer = () => {
    discovery ??= (
      sessionIssuer
        ? discoverIssuer(sessionIssuer, fetchImpl)
        : discoverAuthorizationServer(baseUrl, fetchImpl)
    ).catch((err: unknown) => {
      discovery = undefined;
      throw err;
    });
    return discovery;
  };
  const refreshServer = () => {
    if (!sessionIssuer) {
      throw new SessionExpiredError(
        "the session names no identity provider (no issuer option, no iss claim), so it is never refreshed",
      );
    }
    return authorizationServer();
  };

  const tokens = options.session
    ? new SessionTokens(
        options.session,
        async (session) => {
          const timeoutMs = options.refreshTimeoutMs ?? DEFAULT_REFRESH_TIMEOUT_MS;
          const started = Date.now();
          const server = await withinTimeout(refreshServer(), timeoutMs);
          return refreshSession(session, server, fetchImpl, Math.max(1, timeoutMs - (Date.now() - started)));
        },
        options.onSessionChange,
        options.refreshRunner ?? ((current, refresh) => refresh(current)),
      )
    : undefined;

  const transport = createTransport({
    fetch: fetchImpl,
    credential: tokens
      ? { kind: "session", tokens }
      : options.apiKey
        ? { kind: "apiKey", token: options.apiKey }
        : { kind: "none" },
    retry: { ...defaultRetry, ...options.retry },
  });
  const api = createFetchClient<paths>({ baseUrl, fetch: transport });

  // The transport throws on every non-2xx, so a result without data is only a body-less success.
  const data = async <T>(call: Promise<{ data?: T; response: Response }>): Promise<T> => {
    const { data: body, response } = await call;
    if (body === undefined) {
      throw new ApiError({
        code: "EMPTY_RESPONSE",
        status: response.status,
        message: "The API answered with no body",
      });
    }
    return body;
  };

  const regions = {
    /** The regions offered, in the service's configured order. */
    list: async () => (await data(api.GET("/api/v1/regions"))).items,
    /**
     * Measures every region's latency beacon (a warm-up, then `samples` round trips, one region's probes in
     * sequence, all regions at once) and answers the median per region, nearest first, unreachable (null) last.
     * Beacons get plain GETs without credentials: the bearer goes to the API origin only.
     */
    measure: async (opts: Omit<MeasureOptions, "fetch"> = {}): Promise<MeasuredRegion[]> =>
      measureRegions(await regions.list(), { ...opts, fetch: fetchImpl }),
  };

  const sessions = {
    /**
     * Starts the account's session. Sends an Idempotency-Key, so a retried start never starts twice. With
     * `region: "auto"` and no `rttMs`, measures the regions first (see `regions.measure`) and sends the medians;
     * when no beacon answers it rejects with BEACONS_UNREACHABLE and starts nothing.
     */
    start: async (
      body: StartSessionRequest = {},
      opts: {
        idempotencyKey?: string;
        measure?: Omit<MeasureOptions, "fetch">;
        /** Called with the measurement a `region: "auto"` start made, before it is sent. */
        onMeasured?: (measured: MeasuredRegion[]) => void;
      } = {},
    ) => {
      let request = body;
      if (body.region === "auto" && body.rttMs === undefined) {
        const measured = await regions.measure(opts.measure);
        opts.onMeasured?.(measured);
        const rttMs = roundTripsById(measured);
        if (Object.keys(rttMs).length === 0) {
          throw new ApiError({
            code: "BEACONS_UNREACHABLE",
            status: 0,
            message:
              "No region's latency beacon answered, so the nearest cannot be chosen; start in a named region or try again",
          });
        }
        request = { ...body, rttMs };
      }
      return data(
        api.POST("/api/v1/sessions/start", {
          body: request,
          params: { header: { "Idempotency-Key": opts.idempotencyKey ?? newIdempotencyKey() } },
        }),
      );
    },
    poll: () => data(api.GET("/api/v1/sessions/poll")),
    stop: () => data(api.POST("/api/v1/sessions/stop")),
    /** A PIN for pairing the streaming client, which then stays paired under `deviceName` across sessions. */
    pair: (body: PairingRequest = {}) => data(api.POST("/api/v1/sessions/pair", { body })),
    connect: () => data(api.GET("/api/v1/sessions/connect")),
    vpnKey: () => data(api.POST("/api/v1/sessions/vpn-key")),
    /**
     * Keep playing: postpones an idle stop (and a maximum-length stop being warned about) by one period. Never
     * postpones a stop for lack of credit. Resolves with the session's status.
     */
    keepalive: () => data(api.POST("/api/v1/sessions/keepalive")),
    /** Polls until `ready` (resolves), `failed`/`stopped`/`idle` (rejects), the timeout or the signal. */
    async waitUntilReady(wait: WaitOptions = {}): Promise<SessionStatus> {
      return waitFor((s) => s.state === "running" && s.ready, ["failed", "stopped", "idle"], wait);
    },
    /**
     * Polls while the session is `queued` (reporting its place through `onProgress`) and resolves with the first
     * other status. No timeout by default: the service fails a session that waited past its maximum wait.
     */
    async waitWhileQueued(wait: WaitOptions = {}): Promise<SessionStatus> {
      return waitFor((s) => s.state !== "queued", [], { timeoutMs: Number.POSITIVE_INFINITY, ...wait });
    },
    /** Polls until the session is `stopped`, `idle` or `failed`. */
    async waitUntilStopped(wait: WaitOptions = {}): Promise<SessionStatus> {
      return waitFor((s) => ["stopped", "idle", "failed"].includes(s.state), [], wait);
    },
  };

  async function waitFor(
    done: (s: SessionStatus) => boolean,
    givesUp: SessionStatus["state"][],
    wait: WaitOptions,
  ): Promise<SessionStatus> {
    const started = Date.now();
    const timeoutMs = wait.timeoutMs ?? 600_000;
    const interval = Math.max(MIN_POLL_INTERVAL_MS, wait.intervalMs ?? MIN_POLL_INTERVAL_MS);
    for (;;) {
      wait.signal?.throwIfAborted();
      const status = await sessions.poll();
      const elapsed = Date.now() - started;
      wait.onProgress?.(status, elapsed);
      if (done(status)) return status;
      if (givesUp.includes(status.state)) {
        throw new ApiError({
          code: status.state === "failed" ? "SESSION_FAILED" : "SESSION_NOT_RUNNING",
          status: 0,
          message: status.message ?? `The session is ${status.state}`,
        });
      }
      if (elapsed + interval > timeoutMs) {
        throw new ApiError({
          code: "TIMEOUT",
          status: 0,
          message: `Gave up after ${Math.round(elapsed / 1000)} s; the session is still ${status.state}`,
        });
      }
      await sleep(interval, wait.signal);
    }
  }

  return {
    baseUrl,
    regions,
    sessions,
    credits: {
      me: () => data(api.GET("/api/v1/credits/me")),
      /** Creates a checkout for `amount` (minor units); open `checkoutUrl` to pay. Sends an Idempotency-Key. */
      topup: (amount: number, opts: { idempotencyKey?: string } = {}) =>
        data(
          api.POST("/api/v1/credits/topup", {
            body: { amount },
            params: { header: { "Idempotency-Key": opts.idempotencyKey ?? newIdempotencyKey() } },
          }),
        ),
      /**
       * Auto-recharge: with a saved card, a charge that takes the balance under `threshold` recharges it to
       * `rechargeTo` (at most `monthlyLimit` a month); the credit lands when the payment provider confirms.
       */
      autoRecharge: {
        get: () => data(api.GET("/api/v1/credits/auto-recharge")),
        update: (patch: AutoRechargePatch) =>
          data(api.PATCH("/api/v1/credits/auto-recharge", { body: patch })),
      },
      /** The card auto-recharge charges: `setup()` answers a checkout page to save one; `remove()` forgets it. */
      paymentMethod: {
        setup: () => data(api.POST("/api/v1/credits/payment-method")),
        remove: async () => {
          await api.DELETE("/api/v1/credits/payment-method");
        },
      },
      /** Daily and monthly spending limits (UTC); `null` in a patch removes one. */
      limits: {
        get: () => data(api.GET("/api/v1/credits/limits")),
        update: (patch: SpendLimitsPatch) => data(api.PATCH("/api/v1/credits/limits", { body: patch })),
      },
    },
    billing: { storage: () => data(api.GET("/api/v1/billing/storage")) },
    /** Streaming devices paired with the account's machine (pairing outlives each session). */
    devices: {
      list: async () => (await data(api.GET("/api/v1/devices"))).items,
      /** Unpairs it: at once while a session runs, otherwise when the next session's host comes up. */
      remove: async (id: string) => {
        await api.DELETE("/api/v1/devices/{id}", { params: { path: { id } } });
      },
    },
    settings: {
      get: () => data(api.GET("/api/v1/settings")),
      update: (patch: PreferencesPatch) => data(api.PATCH("/api/v1/settings", { body: patch })),
    },
    account: {
      identity: () => data(api.GET("/api/v1/session")),
      delete: () => data(api.DELETE("/api/v1/account/delete")),
    },
    /** A usable access token: the apiKey, or the session's (refreshed first when it has expired). */
    accessToken: async (): Promise<string | undefined> => (tokens ? tokens.accessToken() : options.apiKey),
    /** The current pair (after any rotation), or undefined for an apiKey client. */
    get session(): Session | undefined {
      return tokens?.session;
    },
    /**
     * The identity provider's endpoints: the session's issuer's (see `issuer`), or for a client without a session
     * the one the API origin names (RFC 9728 + OpenID discovery), for signing in.
     */
    authorizationServer,
    /** The typed openapi-fetch client for operations without a helper. */
    raw: api,
  };
}

export type Client = ReturnType<typeof createClient>;
