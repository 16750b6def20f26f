import { randomBytes } from "node:crypto";
import { Router } from "express";
import type Stripe from "stripe";
import { AppError } from "@cgs/shared";
import type { BillingDeps } from "../domain/billing-deps";
import { checkoutReturnUrls, findTopupByCheckoutSession } from "../domain/topups";

export interface LocalCheckoutOptions {
  stripe: Stripe;
  webhookSecret: string;
  /** Where the signed event is delivered, normally the gateway's /api/v1/billing/stripe-webhook. */
  webhookUrl: string;
  portalBaseUrl: string;
}

const escapeHtml = (text: string) =>
  text.replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!,
  );

/** A stylesheet of its own, not inline: the page is served under the gateway's CSP (style-src 'self'). */
const STYLESHEET = `body{font-family:system-ui,sans-serif;max-width:28rem;margin:4rem auto;padding:0 1rem}
button{font-size:1rem;padding:.6rem 1.2rem;margin-right:.5rem}.note{color:#666;font-size:.85rem}
`;

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<link rel="stylesheet" href="/local-checkout/style.css"></head>
<body>${body}</body></html>`;
}

/**
 * The local stand-in for Stripe's hosted Checkout page (PAYMENT_PROVIDER=local, never in production), reached
 * through the gateway's origin (its LOCAL_CHECKOUT forwards /local-checkout/ here).
 * "Pay" sends the same signed checkout.session.completed webhook Stripe would send, then redirects to the
 * portal's success page, so a top-up completes end to end on a developer machine.
 */
export function localCheckoutRoutes(deps: BillingDeps, options: LocalCheckoutOptions): Router {
  const router = Router();
  const urls = checkoutReturnUrls(options.portalBaseUrl);

  const loadTopup = async (id: string) => {
    const topup = id.startsWith("cs_local_") ? await findTopupByCheckoutSession(deps, id) : undefined;
    if (!topup) throw AppError.notFound("Checkout session not found");
    return topup;
  };

  router.get("/local-checkout/style.css", (_req, res) => {
    res.type("css").send(STYLESHEET);
  });

  router.get("/local-checkout/:id", async (req, res) => {
    const topup = await loadTopup(req.params.id);
    const amount = `${(topup.amount / 100).toFixed(2)} ${topup.currency}`;
    const id = escapeHtml(topup.checkoutSessionId ?? "");
    res.type("html").send(
      page(
        "Local checkout",
        `<h1>Top up ${escapeHtml(amount)}</h1>
<p>Status: <strong>${escapeHtml(topup.status)}</strong></p>
<form method="post" action="/local-checkout/${id}/pay"><button type="submit">Pay</button></form>
<form method="post" action="/local-checkout/${id}/cancel"><button type="submit">Cancel</button></form>
<p class="note">Local stand-in for Stripe Checkout: no card, no money. "Pay" delivers a signed
<code>checkout.session.completed</code> webhook to ${escapeHtml(options.webhookUrl)}.</p>`,
      ),
    );
  });

  router.post("/local-checkout/:id/pay", async (req, res) => {
    const topup = await loadTopup(req.params.id);
    const session = {
      id: topup.checkoutSessionId,
      object: "checkout.session",
      mode: "payment",
      status: "complete",
      payment_status: "paid",
      amount_total: topup.amount,
      currency: topup.currency.toLowerCase(),
      client_reference_id: topup.accountId,
      metadata: { topupId: topup.id, accountId: topup.accountId },
    };
    const payload = JSON.stringify({
      id: `evt_local_${randomBytes(12).toString("hex")}`,
      object: "event",
      api_version: "2025-08-27.basil",
      created: Math.floor(Date.now() / 1000),
      livemode: false,
      type: "checkout.session.completed",
      data: { object: session },
    });
    const signature = options.stripe.webhooks.generateTestHeaderString({
      payload,
      secret: options.webhookSecret,
    });
    let delivered: Response;
    try {
      delivered = await fetch(options.webhookUrl, {
        method: "POST",
        headers: { "content-type": "application/json", "stripe-signature": signature },
        body: payload,
        signal: AbortSignal.timeout(10_000),
      });
    } catch {
      throw AppError.unavailable(`The webhook endpoint ${options.webhookUrl} is unreachable`);
    }
    if (!delivered.ok) {
      throw AppError.unavailable(`The webhook endpoint answered ${delivered.status}`);
    }
    res.redirect(303, urls.successUrl.replace("{CHECKOUT_SESSION_ID}", encodeURIComponent(session.id ?? "")));
  });

  router.post("/local-checkout/:id/cancel", async (req, res) => {
    await loadTopup(req.params.id);
    res.redirect(303, urls.cancelUrl);
  });

  return router;
}
