import { randomBytes } from "node:crypto";
import { Router } from "express";
import { AppError } from "@cgs/shared";
import { LOCAL_DECLINING_CARD } from "../adapters/local-payment-provider";
import type { LocalWebhookSender } from "../adapters/local-webhook-sender";
import { findCardSetupByCheckout } from "../data/card-repository";
import type { BillingDeps } from "../domain/billing-deps";
import { cardSetupReturnUrls } from "../domain/saved-cards";
import { checkoutReturnUrls, findTopupByCheckoutSession } from "../domain/topups";

export interface LocalCheckoutOptions {
  /** Signs and delivers the events Stripe would send. */
  webhooks: LocalWebhookSender;
  /** Where they go, normally the gateway's /api/v1/billing/stripe-webhook (shown on the page). */
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
button{font-size:1rem;padding:.6rem 1.2rem;margin:0 .5rem .5rem 0}.note{color:#666;font-size:.85rem}
`;

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<link rel="stylesheet" href="/local-checkout/style.css"></head>
<body>${body}</body></html>`;
}

const SETUP_PREFIX = "cs_local_setup_";

/**
 * The local stand-in for Stripe's hosted Checkout page (PAYMENT_PROVIDER=local, never in production), reached
 * through the gateway's origin (its LOCAL_CHECKOUT forwards /local-checkout/ here). For a top-up, "Pay" sends the
 * signed checkout.session.completed webhook Stripe would send; for a card setup (setup mode), "Save" sends the
 * setup's completion with a test card (4242, or 0341, which saves but declines every charge). Then it redirects
 * to the portal, so both complete end to end on a developer machine.
 */
export function localCheckoutRoutes(deps: BillingDeps, options: LocalCheckoutOptions): Router {
  const router = Router();
  const urls = checkoutReturnUrls(options.portalBaseUrl);
  const setupUrls = cardSetupReturnUrls(options.portalBaseUrl);

  const loadTopup = async (id: string) => {
    const topup =
      id.startsWith("cs_local_") && !id.startsWith(SETUP_PREFIX)
        ? await findTopupByCheckoutSession(deps, id)
        : undefined;
    if (!topup) throw AppError.notFound("Checkout session not found");
    return topup;
  };
  const loadSetup = async (id: string) => {
    const setup = id.startsWith(SETUP_PREFIX) ? await findCardSetupByCheckout(deps.db, id) : undefined;
    if (!setup) throw AppError.notFound("Checkout session not found");
    return setup;
  };
  const note = (event: string) =>
    `<p class="note">Local stand-in for Stripe Checkout: no card, no money. It delivers a signed
<code>${event}</code> webhook to ${escapeHtml(options.webhookUrl)}.</p>`;

  router.get("/local-checkout/style.css", (_req, res) => {
    res.type("css").send(STYLESHEET);
  });

  router.get("/local-checkout/:id", async (req, res) => {
    if (req.params.id.startsWith(SETUP_PREFIX)) {
      const setup = await loadSetup(req.params.id);
      const id = escapeHtml(setup.checkoutSessionId ?? "");
      res.type("html").send(
        page(
          "Local card setup",
          `<h1>Save a card for auto-recharge</h1>
<p>Status: <strong>${escapeHtml(setup.status)}</strong></p>
<form method="post" action="/local-checkout/${id}/save"><input type="hidden" name="card" value="4242"><button type="submit">Save Visa ending 4242</button></form>
<form method="post" action="/local-checkout/${id}/save"><input type="hidden" name="card" value="${LOCAL_DECLINING_CARD}"><button type="submit">Save Visa ending ${LOCAL_DECLINING_CARD} (declines every charge)</button></form>
<form method="post" action="/local-checkout/${id}/cancel"><button type="submit">Cancel</button></form>
${note("checkout.session.completed")}`,
        ),
      );
      return;
    }
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
${note("checkout.session.completed")}`,
      ),
    );
  });

  router.post("/local-checkout/:id/pay", async (req, res) => {
    const topup = await loadTopup(req.params.id);
    await options.webhooks.deliver("checkout.session.completed", {
      id: topup.checkoutSessionId,
      object: "checkout.session",
      mode: "payment",
      status: "complete",
      payment_status: "paid",
      amount_total: topup.amount,
      currency: topup.currency.toLowerCase(),
      client_reference_id: topup.accountId,
      metadata: { topupId: topup.id, accountId: topup.accountId },
    });
    res.redirect(
      303,
      urls.successUrl.replace("{CHECKOUT_SESSION_ID}", encodeURIComponent(topup.checkoutSessionId ?? "")),
    );
  });

  router.post("/local-checkout/:id/save", async (req, res) => {
    const setup = await loadSetup(req.params.id);
    const body = await new Promise<string>((resolve) => {
      let text = "";
      req.on("data", (chunk: Buffer) => (text += chunk.toString("utf8")));
      req.on("end", () => resolve(text));
    });
    const last4 =
      new URLSearchParams(body).get("card") === LOCAL_DECLINING_CARD ? LOCAL_DECLINING_CARD : "4242";
    await options.webhooks.deliver("checkout.session.completed", {
      id: setup.checkoutSessionId,
      object: "checkout.session",
      mode: "setup",
      status: "complete",
      payment_status: "no_payment_required",
      client_reference_id: setup.accountId,
      setup_intent: `seti_local_${randomBytes(8).toString("hex")}_${last4}`,
      metadata: { cardSetupId: setup.id, accountId: setup.accountId },
    });
    res.redirect(303, setupUrls.successUrl);
  });

  router.post("/local-checkout/:id/cancel", async (req, res) => {
    if (req.params.id.startsWith(SETUP_PREFIX)) {
      await loadSetup(req.params.id);
      res.redirect(303, setupUrls.cancelUrl);
      return;
    }
    await loadTopup(req.params.id);
    res.redirect(303, urls.cancelUrl);
  });

  return router;
}
