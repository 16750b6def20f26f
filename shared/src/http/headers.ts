/** Header names the gateway and the services agree on (lower case, as Node exposes them). */
export const HEADERS = {
  /** Correlates one request's log lines across the gateway and the service behind it. */
  requestId: "x-request-id",
  /** How the gateway authenticated the caller (bearer, cookie); set by the gateway only, on protected routes. */
  authMethod: "x-cgs-auth-method",
  /** Client-chosen key that makes a retried POST answer the first result instead of acting twice. */
  idempotencyKey: "idempotency-key",
} as const;
