import { ApiError } from "@cgs/sdk";

export const EXIT_OK = 0;
export const EXIT_API_ERROR = 1;
export const EXIT_USAGE = 2;
export const EXIT_SIGNED_OUT = 3;
/** Ctrl-C while waiting in line: the session keeps its place (the shell's 128 + SIGINT). */
export const EXIT_INTERRUPTED = 130;

/** Bad arguments or an unusable flag combination (exit 2). */
export class UsageError extends Error {}

/** No credentials, or a session that can no longer be refreshed (exit 3). */
export class SignedOutError extends Error {
  constructor(message = "Not signed in. Run `cgs login` first.") {
    super(message);
  }
}

/** The user pressed Ctrl-C during a wait that leaves something running; the message says what and how to end it. */
export class InterruptedError extends Error {}

/** Maps any failure to the documented exit code and the line printed on stderr. */
export function describeFailure(err: unknown): { code: number; line: string } {
  if (err instanceof SignedOutError) return { code: EXIT_SIGNED_OUT, line: err.message };
  if (err instanceof InterruptedError) return { code: EXIT_INTERRUPTED, line: err.message };
  if (err instanceof UsageError) return { code: EXIT_USAGE, line: `error: ${err.message}` };
  if (err instanceof ApiError) {
    if (err.code === "SESSION_EXPIRED" || (err.status === 401 && err.code === "UNAUTHENTICATED")) {
      return {
        code: EXIT_SIGNED_OUT,
        line: "Your session has expired or was revoked. Run `cgs login` to sign in again.",
      };
    }
    const wait = err.retryAfter !== undefined ? ` (retry after ${err.retryAfter} s)` : "";
    return { code: EXIT_API_ERROR, line: `${err.code}: ${err.message}${wait}` };
  }
  return { code: EXIT_API_ERROR, line: `error: ${err instanceof Error ? err.message : String(err)}` };
}
