import type { Logger } from "pino";
import {
  AppError,
  IdentityUserNotFoundError,
  PasswordRejectedError,
  type Clock,
  type IdentityAdmin,
  type OpenedDatabase,
} from "@cgs/shared";
import type { ResetRepository } from "../data/reset-repository";
import type * as schema from "../data/schema";
import type { Mailer } from "../adapters/smtp-mailer";
import type { ResetTokenCodec } from "./reset-token";

const CLAIM_LEASE_MS = 60_000;

export const MIN_PASSWORD_LENGTH = 10;
export const MAX_PASSWORD_LENGTH = 256;
const EMAIL_PATTERN = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** `{email}` of the request endpoint; VALIDATION_ERROR naming the field otherwise. */
export function parseResetRequest(body: unknown): { email: string } {
  const record = typeof body === "object" && body !== null && !Array.isArray(body) ? body : null;
  if (!record) throw AppError.validation("body", "body must be a JSON object");
  const unknown = Object.keys(record).find((k) => k !== "email");
  if (unknown) throw AppError.validation(unknown, `Unknown field: ${unknown}`);
  const { email } = record as { email?: unknown };
  if (email === undefined) throw AppError.validation("email", "email is required");
  if (typeof email !== "string" || email.length > 254 || !EMAIL_PATTERN.test(email)) {
    throw AppError.validation("email", "email must be an e-mail address");
  }
  return { email: email.trim().toLowerCase() };
}

/** `{token, password}` of the complete endpoint; VALIDATION_ERROR naming the field otherwise. */
export function parseResetCompletion(body: unknown): { token: string; password: string } {
  const record = typeof body === "object" && body !== null && !Array.isArray(body) ? body : null;
  if (!record) throw AppError.validation("body", "body must be a JSON object");
  const unknown = Object.keys(record).find((k) => k !== "token" && k !== "password");
  if (unknown) throw AppError.validation(unknown, `Unknown field: ${unknown}`);
  const { token, password } = record as { token?: unknown; password?: unknown };
  if (token === undefined) throw AppError.validation("token", "token is required");
  if (typeof token !== "string" || token.length < 1 || token.length > 4096) {
    throw AppError.validation("token", "token must be a string of 1 to 4096 characters");
  }
  if (password === undefined) throw AppError.validation("password", "password is required");
  if (typeof password !== "string") throw AppError.validation("password", "password must be a string");
  if (password.length < MIN_PASSWORD_LENGTH) {
    throw AppError.validation("password", `password must be at least ${MIN_PASSWORD_LENGTH} characters`);
  }
  if (password.length > MAX_PASSWORD_LENGTH) {
    throw AppError.validation("password", `password must be at most ${MAX_PASSWORD_LENGTH} characters`);
  }
  return { token, password };
}

export interface PasswordResetDeps {
  database: OpenedDatabase<typeof schema>;
  resets: ResetRepository;
  identity: IdentityAdmin;
  tokens: ResetTokenCodec;
  clock: Clock;
  logger: Logger;
}

/** Completing a reset: the token is consumed only when the identity provider accepted the new password. */
export function createCompleteReset({
  database,
  resets,
  identity,
  tokens,
  clock,
  logger,
}: PasswordResetDeps) {
  return async function completeReset(body: unknown): Promise<void> {
    const { token, password } = parseResetCompletion(body);
    const now = clock.now();
    const claims = await tokens.read(token, now);
    const passwordSetAt = await identity.passwordSetAt(claims.identityUserId).catch((err: unknown) => {
      logger.error({ err }, "identity provider failed during password reset");
      throw AppError.unavailable("The identity provider is unavailable; try again shortly", 5);
    });
    // The password changed since the link was mailed (another link was used): every older link is void.
    if (!passwordSetAt || passwordSetAt.getTime() !== claims.passwordSetAt) {
      throw new AppError("RESET_TOKEN_INVALID", "The reset link is invalid or was already used");
    }
    await database.withTransaction(async (tx) => {
      // A racing complete with the same token waits on this row's key and then finds it taken.
      if (!(await resets.markTokenUsed(tx, claims, now))) {
        throw new AppError("RESET_TOKEN_INVALID", "The reset link is invalid or was already used");
      }
      try {
        await identity.clearLoginFailures(claims.identityUserId);
        await identity.setPassword(claims.identityUserId, password);
      } catch (err) {
        if (err instanceof PasswordRejectedError && err.reason === "reused") {
          throw new AppError("PASSWORD_REUSED", "The new password must differ from the previous one");
        }
        if (err instanceof PasswordRejectedError) {
          throw AppError.validation("password", "password does not meet the password policy");
        }
        if (err instanceof IdentityUserNotFoundError) {
          throw new AppError("RESET_TOKEN_INVALID", "The reset link is invalid or was already used");
        }
        logger.error({ err }, "identity provider failed during password reset");
        throw AppError.unavailable("The identity provider is unavailable; try again shortly", 5);
      }
    });
  };
}

export interface ResetMailerDeps {
  resets: ResetRepository;
  identity: IdentityAdmin;
  tokens: ResetTokenCodec;
  mailer: Mailer;
  clock: Clock;
  logger: Logger;
  publicBaseUrl: string;
  ttlSeconds: number;
  maxAttempts: number;
}

export function resetEmail(link: string, ttlSeconds: number) {
  const minutes = Math.round(ttlSeconds / 60);
  return {
    subject: "Reset your Cloud Gaming password",
    text:
      `Someone asked to reset the password of your Cloud Gaming account.\n\n` +
      `Open this link within ${minutes} minutes to choose a new password:\n${link}\n\n` +
      `If it was not you, ignore this e-mail; your password stays as it is.\n`,
    html:
      `<p>Someone asked to reset the password of your Cloud Gaming account.</p>` +
      `<p><a href="${link}">Choose a new password</a> (the link works for ${minutes} minutes).</p>` +
      `<p>If it was not you, ignore this e-mail; your password stays as it is.</p>`,
  };
}

/**
 * The off-request-path half of a reset request: looks the address up in the identity provider and, for
 * an enabled account with a password (not social-only), mails one link. Failures retry with backoff.
 */
export function createResetRequestProcessor(deps: ResetMailerDeps) {
  const { resets, identity, tokens, mailer, clock, logger } = deps;

  async function handle(email: string): Promise<void> {
    const user = await identity.findUserByEmail(email);
    if (!user || !user.enabled) return;
    const passwordSetAt = await identity.passwordSetAt(user.id);
    if (!passwordSetAt) return;
    const token = await tokens.issue(user.id, passwordSetAt, clock.now());
    const link = `${deps.publicBaseUrl}/reset-password?token=${token}`;
    await mailer.send({ to: user.email ?? email, ...resetEmail(link, deps.ttlSeconds) });
  }

  /** Handles one waiting request; false when none was waiting. */
  async function processOne(): Promise<boolean> {
    const now = clock.now();
    const row = await resets.claimNextRequest(now, CLAIM_LEASE_MS);
    if (!row) return false;
    try {
      await handle(row.email);
      await resets.deleteRequest(row.id);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      if (row.attempts >= deps.maxAttempts) {
        logger.error({ requestId: row.id, err: message }, "reset e-mail dropped after repeated failures");
        await resets.deleteRequest(row.id);
      } else {
        const retryAt = new Date(clock.now().getTime() + Math.min(300_000, 2_000 * 2 ** (row.attempts - 1)));
        logger.warn({ requestId: row.id, err: message }, "reset e-mail failed; will retry");
        await resets.deferRequest(row.id, message, retryAt);
      }
    }
    return true;
  }

  return {
    processOne,
    async drain(limit = 100): Promise<number> {
      let handled = 0;
      while (handled < limit && (await processOne())) handled += 1;
      return handled;
    },
  };
}

export type ResetRequestProcessor = ReturnType<typeof createResetRequestProcessor>;
