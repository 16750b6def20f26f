import { ConfigError, loadConfig } from "@cgs/shared";
import { billingConfigSchema } from "./config";

describe("billing config", () => {
  it("when nothing is set outside production, then the local Stripe defaults and the local checkout are used", () => {
    const config = loadConfig(billingConfigSchema, {});
    expect(config.PAYMENT_PROVIDER).toBe("local");
    expect(config.STRIPE_SECRET_KEY).toBe("sk_test_local");
    expect(config.STRIPE_WEBHOOK_SECRET).toBe("whsec_local_development_secret");
    // The pages are on the one origin: the gateway forwards /local-checkout/ here (its LOCAL_CHECKOUT).
    expect(config.LOCAL_CHECKOUT_BASE_URL).toBe("http://127.0.0.1:8080");
    expect(
      loadConfig(billingConfigSchema, { PORT: "9102", PUBLIC_BASE_URL: "http://127.0.0.1:18080" })
        .LOCAL_CHECKOUT_BASE_URL,
    ).toBe("http://127.0.0.1:18080");
    expect(config.LOCAL_CHECKOUT_WEBHOOK_URL).toBe("http://127.0.0.1:8080/api/v1/billing/stripe-webhook");
    expect(config.storageTiers.basic).toEqual({ tier: "basic", sizeGb: 50, pricePerPeriod: 200 });
  });

  it("when NODE_ENV is production without Stripe secrets, then start-up fails naming both", () => {
    let error: unknown;
    try {
      loadConfig(billingConfigSchema, { NODE_ENV: "production" });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).issues.map((i) => i.variable).sort()).toEqual([
      "STRIPE_SECRET_KEY",
      "STRIPE_WEBHOOK_SECRET",
    ]);
  });

  it("when production is configured, then Stripe is the provider and the local checkout cannot be chosen", () => {
    const env = { NODE_ENV: "production", STRIPE_SECRET_KEY: "sk_live_x", STRIPE_WEBHOOK_SECRET: "whsec_x" };
    expect(loadConfig(billingConfigSchema, env).PAYMENT_PROVIDER).toBe("stripe");
    expect(() => loadConfig(billingConfigSchema, { ...env, PAYMENT_PROVIDER: "local" })).toThrow(
      /PAYMENT_PROVIDER/,
    );
  });

  it.each([
    ["a missing tier", "none:0:0,basic:50:200,standard:250:500"],
    ["a paid none tier", "none:0:5,basic:50:200,standard:250:500,premium:1000:1500"],
    ["a negative price", "none:0:0,basic:50:-1,standard:250:500,premium:1000:1500"],
    ["an unknown tier", "none:0:0,basic:50:200,standard:250:500,premium:1000:1500,gold:1:1"],
  ])("when STORAGE_TIERS has %s, then start-up fails naming it", (_label, value) => {
    expect(() => loadConfig(billingConfigSchema, { STORAGE_TIERS: value })).toThrow(/STORAGE_TIERS/);
  });

  it("when the top-up bounds are inverted, then start-up fails", () => {
    expect(() =>
      loadConfig(billingConfigSchema, { TOPUP_MIN_AMOUNT: "900", TOPUP_MAX_AMOUNT: "800" }),
    ).toThrow(/TOPUP_MIN_AMOUNT/);
  });
});
