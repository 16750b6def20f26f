import { ApiError, apiErrorFrom } from "./errors";
import type { SessionTokens } from "./session-tokens";

export interface RetryOptions {
  /** Retries after the first attempt (default 3). */
  maxRetries?: number;
  /** A Retry-After longer than this is not waited for: the error is raised instead (default 60 000 ms). */
  maxDelayMs?: number;
  /** First back-off for network errors and 503s without Retry-After; doubles each time (default 500 ms). */
  baseDelayMs?: number;
}

export interface TransportOptions {
  fetch: typeof fetch;
  credential:
    { kind: "none" } | { kind: "apiKey"; token: string } | { kind: "session"; tokens: SessionTokens };
  retry: Required<RetryOptions>;
  sleep?: (ms: number, signal?: AbortSignal | null) => Promise<void>;
}

export const defaultRetry: Required<RetryOptions> = { maxRetries: 3, maxDelayMs: 60_000, baseDelayMs: 500 };

export function sleep(ms: number, signal?: AbortSignal | null): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Safe to repeat: reads, and writes that carry an Idempotency-Key (the service answers a repeat with the
 * first response). A 429 is retried for any call: the gateway refused it before any service saw it.
 */
const safeToRepeat = (request: Request) =>
  request.method === "GET" || request.method === "HEAD" || request.headers.has("idempotency-key");

const transientCodes = new Set(["UNAVAILABLE", "CLOUD_CAPACITY"]);

/**
 * The fetch that openapi-fetch calls: adds the bearer, refreshes a session on expiry or one 401, retries within
 * bounds, and turns a non-2xx answer into an ApiError.
 */
export function createTransport(options: TransportOptions): (input: Request) => Promise<Response> {
  const { retry, credential } = options;
  const wait = options.sleep ?? sleep;

  const bearer = async (): Promise<string | undefined> => {
    if (credential.kind === "apiKey") return credential.token;
    if (credential.kind === "session") return credential.tokens.accessToken();
    return undefined;
  };

  return async (input: Request) => {
    const body = input.body ? await input.arrayBuffer() : undefined;
    const send = (token: string | undefined) => {
      const headers = new Headers(input.headers);
      if (token) headers.set("authorization", `Bearer ${token}`);
      return options.fetch(
        new Request(input.url, { method: input.method, headers, body, signal: input.signal }),
      );
    };

    let refreshed = false;
    for (let attempt = 0; ; attempt++) {
      const token = await bearer();
      let res: Response;
      try {
        res = await send(token);
      } catch (cause) {
        if (input.signal?.aborted) throw cause;
        if (safeToRepeat(input) && attempt < retry.maxRetries) {
          await wait(retry.baseDelayMs * 2 ** attempt, input.signal);
          continue;
        }
        throw new ApiError({
          code: "NETWORK_ERROR",
          status: 0,
          message: `Could not reach ${new URL(input.url).origin}: ${cause instanceof Error ? cause.message : String(cause)}`,
          cause,
        });
      }
      if (res.ok) return res;

      if (res.status === 401 && credential.kind === "session" && token && !refreshed) {
        refreshed = true;
        await res.body?.cancel();
        await credential.tokens.renew(token);
        attempt--;
        continue;
      }
      const error = await apiErrorFrom(res);
      const retriable =
        res.status === 429 || (res.status === 503 && transientCodes.has(error.code) && safeToRepeat(input));
      if (!retriable || attempt >= retry.maxRetries) throw error;
      const delayMs =
        error.retryAfter !== undefined ? error.retryAfter * 1000 : retry.baseDelayMs * 2 ** attempt;
      if (delayMs > retry.maxDelayMs) throw error;
      await wait(delayMs, input.signal);
    }
  };
}
