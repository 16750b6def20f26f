/** Every failure the SDK raises: an API error body, a refused session, a network failure or a timeout. */
export class ApiError extends Error {
  override readonly name = "ApiError";
  /** The API's error code (e.g. `INSUFFICIENT_CREDITS`), or the SDK's own: `SESSION_EXPIRED`, `NETWORK_ERROR`, `TIMEOUT`, `SESSION_FAILED`. */
  readonly code: string;
  /** HTTP status; 0 when no response arrived. */
  readonly status: number;
  /** Seconds the server asked to wait (Retry-After), when it did. */
  readonly retryAfter: number | undefined;
  /** The gateway's X-Request-Id, to quote when reporting a problem. */
  readonly requestId: string | undefined;

  constructor(init: {
    code: string;
    status: number;
    message: string;
    retryAfter?: number;
    requestId?: string;
    cause?: unknown;
  }) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.code = init.code;
    this.status = init.status;
    this.retryAfter = init.retryAfter;
    this.requestId = init.requestId;
  }
}

/** The refresh token was refused (expired, revoked or already used): the user has to sign in again. */
export class SessionExpiredError extends ApiError {
  constructor(detail: string, cause?: unknown) {
    super({
      code: "SESSION_EXPIRED",
      status: 401,
      message: `The session has expired or was revoked; sign in again (${detail})`,
      cause,
    });
  }
}

export function parseRetryAfter(value: string | null): number | undefined {
  if (value === null || value.trim() === "") return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}

/** Builds the ApiError for a non-2xx response from its `{error, message}` body. */
export async function apiErrorFrom(res: Response): Promise<ApiError> {
  const text = await res.text().catch(() => "");
  let code = `HTTP_${res.status}`;
  let message = res.statusText || `HTTP ${res.status}`;
  try {
    const body = JSON.parse(text) as { error?: unknown; message?: unknown };
    if (typeof body.error === "string") code = body.error;
    if (typeof body.message === "string") message = body.message;
  } catch {
    // not JSON (a proxy's error page): keep the status line
  }
  return new ApiError({
    code,
    status: res.status,
    message,
    retryAfter: parseRetryAfter(res.headers.get("retry-after")),
    requestId: res.headers.get("x-request-id") ?? undefined,
  });
}
