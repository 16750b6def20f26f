import { AppError } from "../errors";

export interface InternalResponse {
  status: number;
  body: unknown;
}

/** One call to another service's /internal/v1 route with the end user's own token; any transport failure is 503. */
export async function callInternal(
  service: string,
  url: string,
  init: { method: string; token: string; body?: unknown; timeoutMs: number },
): Promise<InternalResponse> {
  let res: Response;
  let text: string;
  try {
    res = await fetch(url, {
      method: init.method,
      headers: {
        authorization: `Bearer ${init.token}`,
        accept: "application/json",
        ...(init.body !== undefined ? { "content-type": "application/json" } : {}),
      },
      body: init.body !== undefined ? JSON.stringify(init.body) : undefined,
      signal: AbortSignal.timeout(init.timeoutMs),
    });
    text = await res.text();
  } catch {
    throw AppError.unavailable(`The ${service} service is unavailable, try again shortly`);
  }
  let body: unknown = undefined;
  if (text.length > 0) {
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
  }
  // The token passed our own check; a callee refusing it means the identity is gone there (e.g. purged).
  if (res.status === 401) throw AppError.unauthenticated();
  if (res.status >= 500 || res.status === 403) {
    throw AppError.unavailable(`The ${service} service is unavailable, try again shortly`);
  }
  return { status: res.status, body };
}
