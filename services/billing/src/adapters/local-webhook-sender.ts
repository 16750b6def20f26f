import { randomBytes } from "node:crypto";
import type Stripe from "stripe";
import { AppError } from "@cgs/shared";

/** Delivers an event signed with the webhook secret exactly as Stripe signs it (the local stand-in only). */
export interface LocalWebhookSender {
  deliver(type: string, object: Record<string, unknown>): Promise<void>;
}

export function createLocalWebhookSender(options: {
  stripe: Stripe;
  webhookSecret: string;
  /** Normally the gateway's /api/v1/billing/stripe-webhook, so the event takes Stripe's way in. */
  webhookUrl: string;
}): LocalWebhookSender {
  return {
    async deliver(type, object) {
      const payload = JSON.stringify({
        id: `evt_local_${randomBytes(12).toString("hex")}`,
        object: "event",
        api_version: "2025-08-27.basil",
        created: Math.floor(Date.now() / 1000),
        livemode: false,
        type,
        data: { object },
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
      if (!delivered.ok) throw AppError.unavailable(`The webhook endpoint answered ${delivered.status}`);
    },
  };
}
