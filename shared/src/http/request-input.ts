import type { Request } from "express";
import type { z } from "zod";
import { AppError } from "../errors";
import { HEADERS } from "./headers";

/**
 * Parses a JSON body with a zod schema; the first problem becomes 400 VALIDATION_ERROR naming the field
 * (an unknown field of a strict schema is named "Unknown field: <name>"). A missing body counts as `{}`.
 */
export function parseBody<S extends z.ZodTypeAny>(schema: S, body: unknown): z.infer<S> {
  const parsed = schema.safeParse(body ?? {});
  if (parsed.success) return parsed.data as z.infer<S>;
  const issue = parsed.error.issues[0];
  if (issue?.code === "unrecognized_keys") {
    const key = issue.keys[0] ?? "body";
    throw AppError.validation(key, `Unknown field: ${key}`);
  }
  const field = issue?.path.join(".") || "body";
  throw AppError.validation(field, `${field} ${(issue?.message ?? "is invalid").toLowerCase()}`);
}

/** The request's Idempotency-Key header: undefined when absent, VALIDATION_ERROR unless 1 to 255 characters. */
export function readIdempotencyKey(req: Pick<Request, "get">): string | undefined {
  const key = req.get(HEADERS.idempotencyKey);
  if (key === undefined) return undefined;
  if (key.length < 1 || key.length > 255) {
    throw AppError.validation("Idempotency-Key", "Idempotency-Key must be 1 to 255 characters");
  }
  return key;
}
