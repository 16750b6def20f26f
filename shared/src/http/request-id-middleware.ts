import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { HEADERS } from "./headers";

export const REQUEST_ID_HEADER = HEADERS.requestId;
const SANE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * Accepts an incoming X-Request-Id when it is short and printable (so it cannot inject into logs),
 * otherwise generates one; echoes it on the response and rewrites the request header so a proxy forwards it.
 */
export function assignRequestId(req: IncomingMessage, res: ServerResponse): string {
  const incoming = req.headers[REQUEST_ID_HEADER];
  const candidate = Array.isArray(incoming) ? incoming[0] : incoming;
  const id = candidate !== undefined && SANE_REQUEST_ID.test(candidate) ? candidate : randomUUID();
  req.headers[REQUEST_ID_HEADER] = id;
  res.setHeader("X-Request-Id", id);
  return id;
}
