import request from "supertest";
import { eq } from "drizzle-orm";
import { topupsTable, walletsTable } from "./data/billing-tables";
import Stripe from "stripe";
import { waitUntil } from "@cgs/shared/testing/queue";
import { createLocalPaymentProvider, LOCAL_DECLINING_CARD } from "./adapters/local-payment-provider";
import { createLocalWebhookSender } from "./adapters/local-webhook-sender";
import { submitRecharges } from "./domain/auto-recharge";
import {
  freePort,
  startBillingTestService,
  TEST_WEBHOOK_SECRET,
  type BillingTestService,
} from "./testing/billing-harness";
import { creditWallet } from "./testing/wallet-fixtures";

describe("local Checkout stand-in (npm start)", () => {
  let svc: BillingTestService;
  let base: string;
  const user = "user-local-checkout";

  beforeAll(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    svc = await startBillingTestService({
      port,
      env: {
        PAYMENT_PROVIDER: "local",
        LOCAL_CHECKOUT_BASE_URL: base,
        // Stripe would call the gateway; here the stand-in calls this service's own webhook route.
        LOCAL_CHECKOUT_WEBHOOK_URL: `${base}/api/v1/billing/stripe-webhook`,
        PUBLIC_BASE_URL: "http://portal.test",
      },
    });
  });
  afterAll(() => svc.close());

  const balance = async () =>
    (await svc.database.db.select().from(walletsTable).where(eq(walletsTable.accountId, user)))[0]?.balance;

  it("when a top-up is paid on the stand-in page, then the signed webhook credits the wallet once, and two top-ups stay apart", async () => {
    const token = await svc.token(user);
    const topup = (amount: number) =>
      request(base).post("/api/v1/credits/topup").set("authorization", `Bearer ${token}`).send({ amount });
    const first = await topup(1_000);
    const second = await topup(600);
    expect(first.status).toBe(200);
    expect(first.body.checkoutUrl).toBe(`${base}/local-checkout/${first.body.checkoutSessionId}`);
    expect(second.body.checkoutSessionId).not.toBe(first.body.checkoutSessionId);

    const page = await request(base).get(`/local-checkout/${first.body.checkoutSessionId}`);
    expect(page.status).toBe(200);
    expect(page.type).toBe("text/html");
    expect(page.text).toContain("Top up 10.00 USD");
    // No inline style: the page is served under the gateway's CSP (style-src 'self').
    expect(page.text).not.toContain("<style");
    expect(page.text).toContain('<link rel="stylesheet" href="/local-checkout/style.css">');
    const css = await request(base).get("/local-checkout/style.css");
    expect(css.status).toBe(200);
    expect(css.type).toBe("text/css");

    const paid = await request(base).post(`/local-checkout/${first.body.checkoutSessionId}/pay`);
    expect(paid.status).toBe(303);
    expect(paid.headers.location).toBe(
      `http://portal.test/account?topup=success&session_id=${first.body.checkoutSessionId}`,
    );
    // 1000 credited, then this period's basic storage (200) settled from it.
    expect(await balance()).toBe(800);
    await request(base).post(`/local-checkout/${first.body.checkoutSessionId}/pay`).expect(303);
    expect(await balance()).toBe(800);
    await request(base).post(`/local-checkout/${second.body.checkoutSessionId}/pay`).expect(303);
    expect(await balance()).toBe(1_400);
    const rows = await svc.database.db.select().from(topupsTable).where(eq(topupsTable.accountId, user));
    expect(rows.map((r) => r.status).sort()).toEqual(["paid", "paid"]);
    const me = await request(base).get("/api/v1/credits/me").set("authorization", `Bearer ${token}`);
    expect(me.body.balance).toBe(1_400);
  });

  it("when the checkout is cancelled, then it redirects to the portal and credits nothing", async () => {
    const token = await svc.token("user-cancel");
    const created = await request(base)
      .post("/api/v1/credits/topup")
      .set("authorization", `Bearer ${token}`)
      .send({ amount: 1_000 });
    const res = await request(base).post(`/local-checkout/${created.body.checkoutSessionId}/cancel`);
    expect(res.status).toBe(303);
    expect(res.headers.location).toBe("http://portal.test/account?topup=cancelled");
  });

  it("when a card is saved on the stand-in page and auto-recharge is on under its threshold, then the local provider's signed payment_intent webhook credits the recharge; the declining test card fails it", async () => {
    const payments = createLocalPaymentProvider(
      base,
      createLocalWebhookSender({
        stripe: new Stripe("sk_test_local"),
        webhookSecret: TEST_WEBHOOK_SECRET,
        webhookUrl: `${base}/api/v1/billing/stripe-webhook`,
      }),
    );
    const recharge = async (acct: string, card: string) => {
      const auth = `Bearer ${await svc.token(acct)}`;
      await creditWallet(svc.deps, acct, 500 + 200);
      const setup = await request(base).post("/api/v1/credits/payment-method").set("authorization", auth);
      expect(setup.body.checkoutUrl).toBe(`${base}/local-checkout/${setup.body.checkoutSessionId}`);
      const page = await request(base).get(`/local-checkout/${setup.body.checkoutSessionId}`);
      expect(page.text).toContain("Save a card for auto-recharge");
      const saved = await request(base)
        .post(`/local-checkout/${setup.body.checkoutSessionId}/save`)
        .type("form")
        .send({ card });
      expect(saved.status).toBe(303);
      expect(saved.headers.location).toBe("http://portal.test/billing?card=saved");
      const on = await request(base)
        .patch("/api/v1/credits/auto-recharge")
        .set("authorization", auth)
        .send({ enabled: true, threshold: 1_000, rechargeTo: 2_000, monthlyLimit: 5_000 });
      expect(on.body.paymentMethod).toMatchObject({ brand: "visa", last4: card });
      await submitRecharges({ ...svc.deps, payments });
      return waitUntil(
        async () => {
          const a = await request(base).get("/api/v1/credits/auto-recharge").set("authorization", auth);
          return a.body.lastRecharge?.status !== "pending" ? a.body : undefined;
        },
        { timeoutMs: 10_000, description: "the local provider's webhook" },
      );
    };
    const paid = await recharge(`user-local-recharge-${Date.now()}`, "4242");
    expect(paid.lastRecharge).toMatchObject({ status: "succeeded", amount: 1_500 });
    const declined = await recharge(`user-local-decline-${Date.now()}`, LOCAL_DECLINING_CARD);
    expect(declined).toMatchObject({
      failuresInARow: 1,
      lastRecharge: { status: "failed", message: "Your card was declined." },
    });
  });

  it("when the checkout id is unknown, then 404", async () => {
    expect((await request(base).get("/local-checkout/cs_local_nope")).status).toBe(404);
    expect((await request(base).post("/local-checkout/cs_test_x/pay")).status).toBe(404);
  });

  it("when the provider is Stripe (as in production), then the stand-in is not served", async () => {
    const stripeSvc = await startBillingTestService();
    try {
      expect((await request(stripeSvc.url).get("/local-checkout/cs_local_x")).status).toBe(404);
    } finally {
      await stripeSvc.close();
    }
  });
});
