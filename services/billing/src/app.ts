import type { RequestListener } from "node:http";
import express, { Router } from "express";
import {
  createBaseApp,
  errorHandler,
  frontHandlers,
  handlerChain,
  installErrorHandlers,
  nameServerSpanByRoute,
  requireAuth,
  type ServiceContext,
} from "@cgs/shared";
import { createLocalWebhookSender } from "./adapters/local-webhook-sender";
import type { BillingAdapters } from "./composition";
import type { BillingConfig } from "./config";
import type * as schema from "./data/schema";
import type { BillingDeps } from "./domain/billing-deps";
import type { TopupDeps } from "./domain/topups";
import { creditsRoutes } from "./http/credits-routes";
import { internalRoutes } from "./http/internal-routes";
import { localCheckoutRoutes } from "./http/local-checkout-routes";
import { walletGuardrailRoutes } from "./http/wallet-guardrail-routes";
import { STRIPE_WEBHOOK_PATH, stripeWebhookRoute } from "./http/stripe-webhook-route";

export type BillingContext = ServiceContext<BillingConfig, typeof schema>;

/**
 * The billing service's HTTP surface. The Stripe webhook is mounted before any JSON parser so its
 * signature is checked over the raw bytes; /api/v1 and /internal/v1 verify the caller's JWT. Stripe's deliveries
 * (the hot path under a burst of payments) skip Express's router: the same handlers run as a fixed chain.
 */
export function createApp(
  context: BillingContext,
  adapters: BillingAdapters,
  deps: BillingDeps,
): RequestListener {
  const { config, logger, verifier, database } = context;
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
  const webhook = stripeWebhookRoute(deps, {
    stripe: adapters.stripe,
    webhookSecret: config.STRIPE_WEBHOOK_SECRET,
    toleranceSeconds: config.STRIPE_WEBHOOK_TOLERANCE_SECONDS,
    payments: adapters.payments,
  });
  // Also routed by Express, for the spellings its router accepts (a trailing slash, another case).
  app.post(STRIPE_WEBHOOK_PATH, ...webhook);
  if (adapters.payments.name === "local" && config.NODE_ENV !== "production") {
    app.use(
      localCheckoutRoutes(deps, {
        webhooks: createLocalWebhookSender({
          stripe: adapters.stripe,
          webhookSecret: config.STRIPE_WEBHOOK_SECRET,
          webhookUrl: config.LOCAL_CHECKOUT_WEBHOOK_URL,
        }),
        webhookUrl: config.LOCAL_CHECKOUT_WEBHOOK_URL,
        portalBaseUrl: config.PUBLIC_BASE_URL,
      }),
    );
  }
  app.use(express.json({ limit: "100kb" }));
  const api = Router();
  api.use(requireAuth(verifier));
  creditsRoutes(topupDeps)(api);
  walletGuardrailRoutes(topupDeps)(api);
  app.use("/api/v1", api);
  const internal = Router();
  internal.use(requireAuth(verifier));
  internal.use(internalRoutes(deps));
  app.use("/internal/v1", internal);
  installErrorHandlers(app, { logger });

  const deliveries = handlerChain(
    app,
    [
      ...frontHandlers({ logger, metricsRoute: () => STRIPE_WEBHOOK_PATH }),
      (_req, _res, next) => {
        nameServerSpanByRoute("POST", STRIPE_WEBHOOK_PATH);
        next();
      },
      ...webhook,
    ],
    [errorHandler({ logger })],
  );
  return (req, res) =>
    req.method === "POST" && req.url === STRIPE_WEBHOOK_PATH ? deliveries(req, res) : app(req, res);
}
