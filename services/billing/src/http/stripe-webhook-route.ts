import express, { type RequestHandler } from "express";
import type Stripe from "stripe";
import { AppError, metrics } from "@cgs/shared";
import type { BillingDeps } from "../domain/billing-deps";
import { createStripeEventIntake } from "../domain/stripe-event-intake";
import type { WebhookPayments } from "../domain/stripe-events";

export interface StripeWebhookOptions {
  stripe: Stripe;
  webhookSecret: string;
  toleranceSeconds: number;
  payments: WebhookPayments;
}

export const STRIPE_WEBHOOK_PATH = "/api/v1/billing/stripe-webhook";

const RECEIVED = Buffer.from(JSON.stringify({ received: true }));
const RECEIVED_HEADERS = {
  "content-type": "application/json; charset=utf-8",
  "content-length": String(RECEIVED.length),
};

/**
 * POST /api/v1/billing/stripe-webhook: the body is read raw (never JSON-parsed first) and verified
 * against Stripe-Signature with the endpoint secret before anything else happens.
 */
export function stripeWebhookRoute(deps: BillingDeps, options: StripeWebhookOptions): RequestHandler[] {
  const intake = createStripeEventIntake(deps, options.payments);
  const verify: RequestHandler = async (req, res) => {
    const started = performance.now();
    const signature = req.get("stripe-signature");
    if (!signature) throw AppError.validation("Stripe-Signature", "Stripe-Signature header is required");
    const body: unknown = req.body;
    if (!Buffer.isBuffer(body) || body.length === 0) throw AppError.validation("body", "body is required");
    let event: Stripe.Event;
    try {
      event = options.stripe.webhooks.constructEvent(
        body,
        signature,
        options.webhookSecret,
        options.toleranceSeconds,
      );
    } catch {
      metrics.webhookFailures.labels("signature").inc();
      throw AppError.validation(
        "Stripe-Signature",
        "Stripe-Signature does not match the body, or its timestamp is outside the tolerance",
      );
    }
    const outcome = await intake.apply(event).catch((err: unknown) => {
      metrics.webhookFailures.labels("processing").inc();
      metrics.webhookDuration.labels("failed").observe((performance.now() - started) / 1000);
      throw err;
    });
    metrics.webhookDuration.labels("applied").observe((performance.now() - started) / 1000);
    // Paid but not credited (held for review): money a player is waiting for, so it counts as a failure too.
    if (outcome === "needs_review") metrics.webhookFailures.labels(outcome).inc();
    deps.logger.info({ stripeEventId: event.id, type: event.type, outcome }, "stripe event received");
    // The same bytes every time: written directly, without res.json's serialising and ETag hashing per event.
    res.writeHead(200, RECEIVED_HEADERS).end(RECEIVED);
  };
  return [express.raw({ type: () => true, limit: "512kb" }), verify];
}
