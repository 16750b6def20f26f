import Stripe from "stripe";

export interface StripeClientSettings {
  secretKey: string;
  /** e.g. http://127.0.0.1:12111 for stripe-mock; unset for the real API. */
  apiBase?: string;
  timeoutMs: number;
}

export function createStripeClient(settings: StripeClientSettings): Stripe {
  const options: Stripe.StripeConfig = {
    timeout: settings.timeoutMs,
    maxNetworkRetries: 1,
    telemetry: false,
  };
  if (settings.apiBase) {
    const url = new URL(settings.apiBase);
    options.host = url.hostname;
    options.port = url.port || (url.protocol === "https:" ? 443 : 80);
    options.protocol = url.protocol === "https:" ? "https" : "http";
  }
  return new Stripe(settings.secretKey, options);
}
