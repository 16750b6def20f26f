import { commonServiceEnv, databaseEnv, envInt, envUrl, queueEnv } from "@cgs/shared";
import { z } from "zod";
import { parseStorageTiers, type StorageTierName } from "./domain/storage-tiers";

const LOCAL_STRIPE_SECRET_KEY = "sk_test_local";
const LOCAL_STRIPE_WEBHOOK_SECRET = "whsec_local_development_secret";

const currencyCode = z
  .string()
  .regex(/^[A-Z]{3}$/, "must be an ISO 4217 code in upper case, e.g. USD")
  .default("USD");

export const billingConfigSchema = z
  .object({
    ...commonServiceEnv(8102),
    ...databaseEnv(),
    ...queueEnv("cgs-billing"),
    PUBLIC_BASE_URL: envUrl()
      .default("http://127.0.0.1:8080")
      .describe("Public origin of the portal; Checkout success and cancel URLs point at its /account page"),
    ACCOUNTS_URL: envUrl()
      .default("http://127.0.0.1:8103")
      .describe("Base URL of the accounts service (deletion-grace check before a top-up)"),
    ACCOUNTS_TIMEOUT_MS: envInt(3_000, 1).describe("Timeout of calls to the accounts service, in ms"),
    WALLET_CURRENCY: currencyCode.describe("Currency of every wallet (ISO 4217, upper case)"),
    SESSION_RATE_PER_MINUTE: envInt(10, 1).describe(
      "Session price per minute in minor units, shown by GET /credits/me (sessions sends its own rate per session)",
    ),
    TOPUP_MIN_AMOUNT: envInt(500, 1).describe("Smallest top-up, in minor units"),
    TOPUP_MAX_AMOUNT: envInt(50_000, 1).describe("Largest top-up, in minor units"),
    PAYMENT_PROVIDER: z
      .enum(["stripe", "local"])
      .optional()
      .describe(
        "stripe (Stripe API, or stripe-mock via STRIPE_API_BASE) or local (the built-in stand-in for Stripe's hosted page); default local outside production, stripe in production",
      ),
    STRIPE_SECRET_KEY: z
      .string()
      .min(1)
      .optional()
      .describe(
        `Stripe secret API key; required in production, defaults to ${LOCAL_STRIPE_SECRET_KEY} otherwise`,
      ),
    STRIPE_WEBHOOK_SECRET: z
      .string()
      .min(1)
      .optional()
      .describe(
        `Signing secret of the Stripe webhook endpoint (whsec_...); required in production, defaults to ${LOCAL_STRIPE_WEBHOOK_SECRET} otherwise`,
      ),
    STRIPE_API_BASE: envUrl()
      .optional()
      .describe(
        "Stripe API base URL override (stripe-mock at http://127.0.0.1:12111 locally); unset in production",
      ),
    STRIPE_WEBHOOK_TOLERANCE_SECONDS: envInt(300, 1).describe(
      "Maximum age of a Stripe-Signature timestamp, in seconds",
    ),
    STRIPE_TIMEOUT_MS: envInt(10_000, 1).describe("Timeout of Stripe API calls, in ms"),
    LOCAL_CHECKOUT_BASE_URL: envUrl()
      .optional()
      .describe(
        "Origin of the local Checkout stand-in's pages (PAYMENT_PROVIDER=local only); default PUBLIC_BASE_URL, where the gateway (LOCAL_CHECKOUT=true) forwards /local-checkout/ to this service",
      ),
    LOCAL_CHECKOUT_WEBHOOK_URL: envUrl()
      .optional()
      .describe(
        "Where the local Checkout stand-in delivers its signed webhook; default <PUBLIC_BASE_URL>/api/v1/billing/stripe-webhook",
      ),
    STORAGE_TIERS: z
      .string()
      .default("none:0:0,basic:50:200,standard:250:500,premium:1000:1500")
      .describe(
        "Storage tiers as tier:sizeGb:pricePerPeriod (minor units per calendar month), comma-separated",
      ),
    STORAGE_DEFAULT_TIER: z
      .enum(["none", "basic", "standard", "premium"])
      .default("basic")
      .describe("Storage tier a new wallet starts on"),
    START_HOLD_MINUTES: envInt(15, 1).describe("Minutes of play a start authorization must cover and holds"),
    HOLD_TTL_MS: envInt(1_800_000, 1).describe(
      "A hold whose session never reported started or failed is released after this long, in ms",
    ),
    METERING_INTERVAL_MS: envInt(5_000, 10).describe("Pause between metering passes, in ms"),
    METERING_MINUTE_MS: envInt(60_000, 10).describe(
      "Length of a billed minute in ms: 60000 in every real deployment, shorter only in tests",
    ),
    LOW_CREDIT_WARNING_MINUTES: envInt(10, 1).describe(
      "A running session that its balance, or a spending limit, allows fewer minutes than this is warned about in poll (credits.low to sessions)",
    ),
    METERING_BATCH_SIZE: envInt(2_000, 1).describe("Running sessions charged per metering transaction"),
    METERING_AUDIT_INTERVAL_MS: envInt(300_000, 10).describe(
      "Pause between passes that ask sessions whether each metered session is still running, in ms",
    ),
    STORAGE_BILLING_INTERVAL_MS: envInt(600_000, 10).describe(
      "Pause between storage-period charging passes, in ms",
    ),
    AUTO_RECHARGE_INTERVAL_MS: envInt(5_000, 10).describe(
      "Pause between passes that send recorded auto-recharges to Stripe and detach removed cards, in ms",
    ),
  })
  .superRefine((config, ctx) => {
    if (config.NODE_ENV === "production") {
      for (const key of ["STRIPE_SECRET_KEY", "STRIPE_WEBHOOK_SECRET"] as const) {
        if (!config[key]) {
          ctx.addIssue({ code: z.ZodIssueCode.custom, path: [key], message: "is required in production" });
        }
      }
      if (config.PAYMENT_PROVIDER === "local") {
        ctx.addIssue({
          code: z.ZodIssueCode.custom,
          path: ["PAYMENT_PROVIDER"],
          message: "local is not allowed in production",
        });
      }
    }
    if (config.TOPUP_MIN_AMOUNT > config.TOPUP_MAX_AMOUNT) {
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        path: ["TOPUP_MIN_AMOUNT"],
        message: "must not exceed TOPUP_MAX_AMOUNT",
      });
    }
    try {
      parseStorageTiers(config.STORAGE_TIERS);
    } catch (err) {
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        path: ["STORAGE_TIERS"],
        message: err instanceof Error ? err.message : String(err),
      });
    }
  })
  .transform((config) => {
    const production = config.NODE_ENV === "production";
    return {
      ...config,
      PAYMENT_PROVIDER: config.PAYMENT_PROVIDER ?? (production ? "stripe" : "local"),
      STRIPE_SECRET_KEY: config.STRIPE_SECRET_KEY ?? LOCAL_STRIPE_SECRET_KEY,
      STRIPE_WEBHOOK_SECRET: config.STRIPE_WEBHOOK_SECRET ?? LOCAL_STRIPE_WEBHOOK_SECRET,
      LOCAL_CHECKOUT_BASE_URL: config.LOCAL_CHECKOUT_BASE_URL ?? config.PUBLIC_BASE_URL,
      LOCAL_CHECKOUT_WEBHOOK_URL:
        config.LOCAL_CHECKOUT_WEBHOOK_URL ?? `${config.PUBLIC_BASE_URL}/api/v1/billing/stripe-webhook`,
      storageTiers: parseStorageTiers(config.STORAGE_TIERS),
      STORAGE_DEFAULT_TIER: config.STORAGE_DEFAULT_TIER as StorageTierName,
    };
  });

export type BillingConfig = z.output<typeof billingConfigSchema>;
