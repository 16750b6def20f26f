import express, { Router, type Express } from "express";
import type Stripe from "stripe";
import {
  createAccountsClient,
  createBaseApp,
  installErrorHandlers,
  requireAuth,
  type AccountsClient,
  type ServiceContext,
} from "@cgs/shared";
import type { BillingConfig } from "./config";
import type * as schema from "./data/schema";
import { billingSettings, type BillingDeps } from "./domain/billing-deps";
import type { TopupDeps } from "./domain/topups";
import { createLocalPaymentProvider } from "./integrations/local-payment-provider";
import type { PaymentProvider } from "./integrations/payment-provider";
import { createStripeClient } from "./integrations/stripe-client";
import { createStripePaymentProvider } from "./integrations/stripe-payment-provider";
import { creditsRoutes } from "./http/credits-routes";
import { internalRoutes } from "./http/internal-routes";
import { localCheckoutRoutes } from "./http/local-checkout-routes";
import { stripeWebhookRoute } from "./http/stripe-webhook-route";

export type BillingContext = ServiceContext<BillingConfig, typeof schema>;

/** Outside systems, chosen from config at the composition root; tests may pass their own. */
export interface BillingAdapters {
  stripe: Stripe;
  payments: PaymentProvider;
  accounts: AccountsClient;
  now: () => Date;
}

export function billingAdapters(
  config: BillingConfig,
  overrides: Partial<BillingAdapters> = {},
): BillingAdapters {
  const stripe =
    overrides.stripe ??
    createStripeClient({
      secretKey: config.STRIPE_SECRET_KEY,
      apiBase: config.STRIPE_API_BASE,
      timeoutMs: config.STRIPE_TIMEOUT_MS,
    });
  return {
    stripe,
    payments:
      overrides.payments ??
      (config.PAYMENT_PROVIDER === "local"
        ? createLocalPaymentProvider(config.LOCAL_CHECKOUT_BASE_URL)
        : createStripePaymentProvider(stripe)),
    accounts:
      overrides.accounts ??
      createAccountsClient({ baseUrl: config.ACCOUNTS_URL, timeoutMs: config.ACCOUNTS_TIMEOUT_MS }),
    now: overrides.now ?? (() => new Date()),
  };
}

export function billingDeps(context: BillingContext, now: () => Date): BillingDeps {
  return {
    db: context.database.db,
    settings: billingSettings(context.config),
    logger: context.logger,
    now,
  };
}

/**
 * The billing service's HTTP surface. The Stripe webhook is mounted before any JSON parser so its
 * signature is checked over the raw bytes; /api/v1 and /internal/v1 verify the caller's JWT.
 */
export function createApp(context: BillingContext, overrides: Partial<BillingAdapters> = {}): Express {
  const { config, logger, verifier, database } = context;
  const adapters = billingAdapters(config, overrides);
  const deps = billingDeps(context, adapters.now);
  const topupDeps: TopupDeps = {
    ...deps,
    payments: adapters.payments,
    accounts: adapters.accounts,
    portalBaseUrl: config.PUBLIC_BASE_URL,
  };
  const app = createBaseApp({
    logger,
    jsonLimit: false,
    readiness: [{ name: "db", check: () => database.ping() }],
  });
  app.post(
    "/api/v1/billing/stripe-webhook",
    ...stripeWebhookRoute(deps, {
      stripe: adapters.stripe,
      webhookSecret: config.STRIPE_WEBHOOK_SECRET,
      toleranceSeconds: config.STRIPE_WEBHOOK_TOLERANCE_SECONDS,
      payments: adapters.payments,
    }),
  );
  if (adapters.payments.name === "local" && config.NODE_ENV !== "production") {
    app.use(
      localCheckoutRoutes(deps, {
        stripe: adapters.stripe,
        webhookSecret: config.STRIPE_WEBHOOK_SECRET,
        webhookUrl: config.LOCAL_CHECKOUT_WEBHOOK_URL,
        portalBaseUrl: config.PUBLIC_BASE_URL,
      }),
    );
  }
  app.use(express.json({ limit: "100kb" }));
  const api = Router();
  api.use(requireAuth(verifier));
  creditsRoutes(topupDeps)(api);
  app.use("/api/v1", api);
  const internal = Router();
  internal.use(requireAuth(verifier));
  internal.use(internalRoutes(deps));
  app.use("/internal/v1", internal);
  installErrorHandlers(app, { logger });
  return app;
}
