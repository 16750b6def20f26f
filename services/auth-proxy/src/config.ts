import { commonServiceEnv, databaseEnv, envInt, envUrl, identityAdminEnv } from "@cgs/shared";
import { z } from "zod";

/** Development-only default; production must set its own (checked below). */
export const LOCAL_RESET_TOKEN_SECRET = "cgs-local-reset-token-secret-change-me-in-production";

export const authProxyConfigSchema = z
  .object({
    ...commonServiceEnv(8104),
    ...databaseEnv(),
    ...identityAdminEnv(),
    PUBLIC_BASE_URL: envUrl()
      .default("http://127.0.0.1:8080")
      .describe(
        "Public origin of the portal; reset links point to <PUBLIC_BASE_URL>/reset-password?token=...",
      ),
    RESET_TOKEN_SECRET: z
      .string()
      .min(32, "must be at least 32 characters")
      .optional()
      .describe(
        "Secret the reset-token signing and encryption keys derive from (32+ characters); required in production",
      ),
    RESET_TOKEN_TTL_SECONDS: envInt(3600, 60).describe(
      "Lifetime of a password-reset link, in seconds (1 hour)",
    ),
    SMTP_URL: z
      .string()
      .regex(/^smtps?:\/\//, "must be an smtp:// or smtps:// URL")
      .default("smtp://127.0.0.1:1025")
      .describe(
        "SMTP server for reset e-mails, e.g. smtps://user:pass@email-smtp.eu-west-1.amazonaws.com:465",
      ),
    MAIL_FROM: z
      .string()
      .min(3)
      .default("Cloud Gaming <no-reply@cgs.local>")
      .describe("From address of reset e-mails"),
    RESET_WORKER_INTERVAL_MS: envInt(1_000, 10).describe(
      "Pause between passes of the worker that looks up accounts and sends reset e-mails, in ms",
    ),
    RESET_WORKER_MAX_ATTEMPTS: envInt(5, 1).describe(
      "Attempts to send one reset e-mail (identity provider or SMTP failing) before it is dropped",
    ),
  })
  .superRefine((config, ctx) => {
    if (config.NODE_ENV === "production" && !config.RESET_TOKEN_SECRET) {
      ctx.addIssue({ code: "custom", path: ["RESET_TOKEN_SECRET"], message: "is required in production" });
    }
    if (config.NODE_ENV === "production" && !config.KEYCLOAK_ADMIN_CLIENT_SECRET) {
      ctx.addIssue({
        code: "custom",
        path: ["KEYCLOAK_ADMIN_CLIENT_SECRET"],
        message: "is required in production",
      });
    }
  });

export type AuthProxyConfig = z.output<typeof authProxyConfigSchema>;
