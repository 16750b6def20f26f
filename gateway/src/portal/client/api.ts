/** The portal's one way to call the API: same origin, the session cookie, the contract's error body. */

export interface ApiFailure {
  status: number;
  /** The contract's error code, or NETWORK when no answer came back. */
  error: string;
  message: string;
  /** Seconds from Retry-After (429, 503), when the server sent it. */
  retryAfter: number | null;
}

export type ApiResult<T> = { ok: true; status: number; body: T } | { ok: false; failure: ApiFailure };

export async function api<T>(method: string, path: string, body?: unknown): Promise<ApiResult<T>> {
  let res: Response;
  try {
    res = await fetch(`/api/v1${path}`, {
      method,
      credentials: "same-origin",
      headers: body === undefined ? {} : { "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    return {
      ok: false,
      failure: {
        status: 0,
        error: "NETWORK",
        message: "Network error. Check your connection.",
        retryAfter: null,
      },
    };
  }
  const text = await res.text();
  let parsed: unknown = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = null;
  }
  if (res.ok) return { ok: true, status: res.status, body: parsed as T };
  if (res.status === 401) {
    // The session ended (expired or signed out elsewhere): sign in again rather than show a broken page.
    window.location.assign("/login");
  }
  const err = (parsed ?? {}) as { error?: string; message?: string };
  const retry = Number(res.headers.get("Retry-After"));
  return {
    ok: false,
    failure: {
      status: res.status,
      error: err.error ?? "INTERNAL",
      message: err.message ?? "Something went wrong. Try again later.",
      retryAfter: Number.isFinite(retry) && retry > 0 ? retry : null,
    },
  };
}

export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const el = document.getElementById(id);
  if (!el) throw new Error(`#${id} is missing from the page`);
  return el as T;
}

export function money(minor: number, currency: string): string {
  return new Intl.NumberFormat(undefined, { style: "currency", currency }).format(minor / 100);
}

export function dateTime(iso: string): string {
  return new Date(iso).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

export function date(iso: string): string {
  return new Date(iso).toLocaleDateString(undefined, { dateStyle: "long" });
}

/** 75 → "1:15", 3725 → "1:02:05". */
export function clock(totalSeconds: number): string {
  const s = Math.max(0, Math.floor(totalSeconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = String(s % 60).padStart(2, "0");
  return h > 0 ? `${h}:${String(m).padStart(2, "0")}:${sec}` : `${m}:${sec}`;
}

/** Writes a status line; `kind` picks its colour (info, success, error). */
export function say(el: HTMLElement, text: string, kind: "info" | "success" | "error" = "info"): void {
  el.textContent = text;
  el.className = `message ${kind}`;
}
