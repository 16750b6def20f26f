import { randomUUID } from "node:crypto";
import { and, desc, eq, like } from "drizzle-orm";
import Stripe from "stripe";
import request from "supertest";
import { createEvent, type AnyEvent } from "@cgs/shared";
import { createContractChecker } from "@cgs/shared/testing/contract";
import { createStripeClient } from "./adapters/stripe-client";
import { createStripePaymentProvider } from "./adapters/stripe-payment-provider";
import type { OffSessionCharge, PaymentProvider, RefundRequest } from "./adapters/payment-provider";
import {
  cardSetupsTable,
  ledgerEntriesTable,
  paymentMethodsTable,
  topupsTable,
  walletsTable,
} from "./data/billing-tables";
import { findLedgerMismatches } from "./data/wallet-repository";
import { closeWallet } from "./domain/account-closure";
import { submitRecharges } from "./domain/auto-recharge";
import { meterRunningSessions } from "./domain/metering";
import { detachRetiredCards } from "./domain/saved-cards";
import { authorizeStart } from "./domain/start-authorization";
import { billingEventHandlers } from "./events/billing-event-handlers";
import {
  startBillingTestService,
  STRIPE_MOCK_URL,
  testClock,
  type BillingTestService,
} from "./testing/billing-harness";
import { creditWallet, postSignedEvent, sessionStarted, stripeEvent } from "./testing/wallet-fixtures";

const contract = createContractChecker();
const MINUTE = 60_000;
const RATE = 100;
const STORAGE = 200; // the basic tier's charge for the period, taken from the first credit

describe("auto-recharge (real PostgreSQL, stripe-mock for Stripe's API, signed events for its outcomes)", () => {
  let svc: BillingTestService;
  const clock = testClock("2026-11-20T10:00:00.000Z");
  /** Every off-session charge billing asked for, every card it detached, every refund. */
  const charges: OffSessionCharge[] = [];
  const detached: string[] = [];
  const refunds: RefundRequest[] = [];
  /** The next PaymentIntent creation for this account meets a card decline (see beforeAll). */
  let declineNext: { accountId: string; code: string; message: string } | undefined;
  /** Sessions still running, stopped after each case so later cases' metering passes leave them alone. */
  const running: (() => AnyEvent)[] = [];
  let handlers: ReturnType<typeof billingEventHandlers>;
  let payments: PaymentProvider;

  beforeAll(async () => {
    const stripe = createStripeClient({
      secretKey: "sk_test_billing",
      apiBase: STRIPE_MOCK_URL,
      timeoutMs: 5_000,
    });
    // stripe-mock answers every PaymentIntent with its fixture and cannot decline a card, so a decline is raised
    // here, where the SDK raises Stripe's own card error: the adapter's handling of it is what runs.
    const createIntent = stripe.paymentIntents.create.bind(stripe.paymentIntents);
    stripe.paymentIntents.create = ((
      params: Stripe.PaymentIntentCreateParams,
      options?: Stripe.RequestOptions,
    ) => {
      const fault = declineNext;
      if (fault && params.metadata?.accountId === fault.accountId) {
        declineNext = undefined;
        return Promise.reject(
          new Stripe.errors.StripeCardError({
            type: "card_error",
            code: fault.code,
            message: fault.message,
            payment_intent: { id: `pi_declined_${randomUUID().slice(0, 8)}` } as Stripe.PaymentIntent,
          }),
        );
      }
      return createIntent(params, options);
    }) as typeof stripe.paymentIntents.create;
    const real = createStripePaymentProvider(stripe);
    // The real adapter against stripe-mock; the wrapper only records what billing asked Stripe to do.
    payments = {
      ...real,
      chargeSavedCard: async (r) => {
        charges.push(r);
        return real.chargeSavedCard(r);
      },
      detachCard: async (id) => {
        detached.push(id);
        return real.detachCard(id);
      },
      refundPayment: async (r) => {
        refunds.push(r);
        return real.refundPayment(r);
      },
    };
    svc = await startBillingTestService({ adapters: { stripe, payments }, clock });
    handlers = billingEventHandlers(svc.deps);
  });
  afterAll(() => svc.close());

  afterEach(async () => {
    for (const stop of running.splice(0)) await consume(stop());
    // The ledger invariants after every case: balance = ledger sum - shortfall, never negative, nothing twice.
    expect(await findLedgerMismatches(svc.database.db)).toEqual([]);
    const recharges = await svc.database.db
      .select({ reference: ledgerEntriesTable.reference })
      .from(ledgerEntriesTable)
      .where(like(ledgerEntriesTable.reference, "recharge:%"));
    expect(new Set(recharges.map((r) => r.reference)).size).toBe(recharges.length);
    const wallets = await svc.database.db.select({ balance: walletsTable.balance }).from(walletsTable);
    expect(wallets.every((w) => w.balance >= 0)).toBe(true);
  });

  const account = () => `acct-recharge-${randomUUID()}`;
  /** What the service's auto-recharge worker runs, with the same (recording) adapter. */
  const submit = () => submitRecharges({ ...svc.deps, payments });

  async function api(acct: string, method: "get" | "patch" | "post" | "delete", path: string, body?: object) {
    const agent = request(svc.url);
    const call = agent[method](path).set("authorization", `Bearer ${await svc.token(acct)}`);
    const res = body ? await call.send(body) : await call;
    if (res.status < 300 && res.status !== 204)
      contract.assertResponse(method.toUpperCase(), path, res.status, res.body);
    return res;
  }

  const send = (event: Stripe.Event) => postSignedEvent(svc.url, event);
  const deliver = async (event: Stripe.Event) => {
    const res = await send(event);
    expect(res.status).toBe(200);
  };

  /** Saves stripe-mock's test card (visa 4242, 08/2030) through a setup-mode checkout and its signed completion. */
  async function saveCard(acct: string) {
    const res = await api(acct, "post", "/api/v1/credits/payment-method");
    expect(res.status).toBe(200);
    const [setup] = await svc.database.db
      .select()
      .from(cardSetupsTable)
      .where(eq(cardSetupsTable.accountId, acct))
      .orderBy(desc(cardSetupsTable.createdAt));
    const completed = stripeEvent("checkout.session.completed", {
      id: res.body.checkoutSessionId,
      object: "checkout.session",
      mode: "setup",
      status: "complete",
      payment_status: "no_payment_required",
      client_reference_id: acct,
      setup_intent: `seti_${randomUUID().replace(/-/g, "")}`,
      metadata: { cardSetupId: setup!.id, accountId: acct },
    });
    await deliver(completed);
    return completed;
  }

  const consume = (event: AnyEvent) =>
    svc.database.withTransaction(async (tx) => {
      const handler = handlers[event.type] as (e: AnyEvent, t: typeof tx) => Promise<void>;
      await handler(event, tx);
    });

  /** A session of the account starts running now (held, then metered from minute 0). */
  async function play(acct: string) {
    const sessionId = `s-${randomUUID()}`;
    await authorizeStart(svc.deps, acct, { sessionId, ratePerMinute: RATE, currency: "USD" });
    const startedAt = clock.now();
    await consume(sessionStarted(acct, { sessionId, ratePerMinute: RATE, startedAt }));
    const stop = () =>
      createEvent("session.stopped", acct, {
        sessionId,
        startedAt: startedAt.toISOString(),
        stoppedAt: clock.now().toISOString(),
        ratePerMinute: RATE,
        currency: "USD",
        reason: "user",
      });
    running.push(stop);
    return { sessionId, startedAt, stop };
  }

  const balance = async (acct: string) =>
    (await svc.database.db.select().from(walletsTable).where(eq(walletsTable.accountId, acct)))[0]!.balance;
  const rechargesOf = (acct: string) =>
    svc.database.db
      .select()
      .from(topupsTable)
      .where(and(eq(topupsTable.accountId, acct), eq(topupsTable.origin, "auto_recharge")))
      .orderBy(topupsTable.createdAt);

  /** Meters minute after minute (the clock moves a minute each time) until the balance is under `under`. */
  async function playUntilUnder(acct: string, under: number, maxMinutes = 100) {
    for (let i = 0; i < maxMinutes && (await balance(acct)) >= under; i += 1) {
      clock.advance(MINUTE);
      await meterRunningSessions(svc.deps);
    }
    expect(await balance(acct)).toBeLessThan(under);
  }

  const intent = (
    recharge: { id: string; paymentIntentId: string | null; amount: number },
    acct: string,
  ) => ({
    id: recharge.paymentIntentId,
    object: "payment_intent",
    amount: recharge.amount,
    currency: "usd",
    metadata: { rechargeId: recharge.id, accountId: acct },
  });
  const succeeded = (recharge: Parameters<typeof intent>[0], acct: string, eventId?: string) =>
    stripeEvent(
      "payment_intent.succeeded",
      { ...intent(recharge, acct), status: "succeeded", amount_received: recharge.amount },
      eventId,
    );
  const failed = (recharge: Parameters<typeof intent>[0], acct: string, message: string) =>
    stripeEvent("payment_intent.payment_failed", {
      ...intent(recharge, acct),
      status: "requires_payment_method",
      last_payment_error: { code: "card_declined", message },
    });

  /** The account with `credit` to spend (the period's storage is paid from the first credit) and a saved card. */
  async function readyAccount(credit: number, settings: object) {
    const acct = account();
    await creditWallet(svc.deps, acct, credit + STORAGE);
    await saveCard(acct);
    const res = await api(acct, "patch", "/api/v1/credits/auto-recharge", { enabled: true, ...settings });
    expect(res.status).toBe(200);
    return acct;
  }

  it("when a player saves a card through setup-mode Checkout, then the signed completion saves it as brand, last four and expiry; a redelivery changes nothing and a setup the platform never opened saves no card", async () => {
    const acct = account();
    expect((await api(acct, "get", "/api/v1/credits/auto-recharge")).body).toMatchObject({
      enabled: false,
      paymentMethod: null,
    });
    const opened = await api(acct, "post", "/api/v1/credits/payment-method");
    expect(opened.body.checkoutUrl).toMatch(/^https:\/\//);
    const completed = await saveCard(acct);
    await deliver(completed);
    const shown = (await api(acct, "get", "/api/v1/credits/auto-recharge")).body;
    // stripe-mock's SetupIntent fixture saves its test card.
    expect(shown.paymentMethod).toEqual({ brand: "visa", last4: "4242", expMonth: 8, expYear: 2030 });

    const stranger = account();
    await deliver(
      stripeEvent("checkout.session.completed", {
        id: `cs_test_${randomUUID().replace(/-/g, "")}`,
        object: "checkout.session",
        mode: "setup",
        payment_status: "no_payment_required",
        client_reference_id: stranger,
        setup_intent: "seti_unknown",
        metadata: { accountId: stranger },
      }),
    );
    expect((await api(stranger, "get", "/api/v1/credits/auto-recharge")).body.paymentMethod).toBeNull();
  });

  it("when auto-recharge is set badly, then the answer is 400 naming the field; without a card it cannot be turned on", async () => {
    const acct = account();
    await creditWallet(svc.deps, acct, 1_000);
    const noCard = await api(acct, "patch", "/api/v1/credits/auto-recharge", {
      enabled: true,
      threshold: 500,
      rechargeTo: 2_000,
      monthlyLimit: 10_000,
    });
    expect(noCard.status).toBe(400);
    expect(noCard.body).toMatchObject({
      error: "VALIDATION_ERROR",
      message: expect.stringContaining("enabled"),
    });
    await saveCard(acct);
    const cases: [object, string][] = [
      [{ enabled: true, threshold: 500, rechargeTo: 600, monthlyLimit: 10_000 }, "rechargeTo"],
      [{ enabled: true, threshold: 500, rechargeTo: 2_000, monthlyLimit: 1_000 }, "monthlyLimit"],
      [{ enabled: true, threshold: 500 }, "rechargeTo"],
      [{ enabled: "yes" }, "enabled"],
      [{ threshold: -5 }, "threshold"],
      [{ color: "red" }, "color"],
    ];
    for (const [body, field] of cases) {
      const res = await api(acct, "patch", "/api/v1/credits/auto-recharge", body);
      expect(res.status).toBe(400);
      expect(res.body.message).toContain(field);
    }
    expect((await api(acct, "get", "/api/v1/credits/auto-recharge")).body.enabled).toBe(false);
  });

  it("when a minute of play takes the balance under the threshold, then exactly one off-session PaymentIntent is made with an idempotency key, the credit lands only from the signed payment_intent.succeeded, once, and it shows as an auto-recharge", async () => {
    const acct = await readyAccount(1_500, { threshold: 1_000, rechargeTo: 3_000, monthlyLimit: 10_000 });
    await play(acct);
    await playUntilUnder(acct, 1_000);
    const [recharge, ...more] = await rechargesOf(acct);
    expect(more).toEqual([]);
    expect(recharge).toMatchObject({ status: "creating", amount: 3_000 - (await balance(acct)) });
    // Nothing is credited by the intent itself.
    const before = await balance(acct);

    await submit();
    const sent = charges.filter((c) => c.accountId === acct);
    expect(sent).toEqual([
      expect.objectContaining({
        rechargeId: recharge!.id,
        amount: recharge!.amount,
        currency: "USD",
        idempotencyKey: `cgs-recharge-${recharge!.id}`,
      }),
    ]);
    const [open] = await rechargesOf(acct);
    expect(open).toMatchObject({ status: "open", paymentIntentId: expect.stringMatching(/^pi_/) });
    expect((await api(acct, "get", "/api/v1/credits/auto-recharge")).body.lastRecharge).toMatchObject({
      status: "pending",
      amount: recharge!.amount,
    });
    // Further minutes under the threshold start no second recharge while one is in flight.
    clock.advance(MINUTE);
    await meterRunningSessions(svc.deps);
    expect(await rechargesOf(acct)).toHaveLength(1);
    const afterMinute = await balance(acct);
    expect(afterMinute).toBe(before - RATE);

    const paid = succeeded(open!, acct);
    await Promise.all([deliver(paid), deliver(paid), deliver(succeeded(open!, acct))]);
    expect(await balance(acct)).toBe(afterMinute + recharge!.amount);
    const shown = (await api(acct, "get", "/api/v1/credits/auto-recharge")).body;
    expect(shown).toMatchObject({
      enabled: true,
      rechargedThisMonth: recharge!.amount,
      failuresInARow: 0,
      lastRecharge: { status: "succeeded", paymentId: open!.paymentIntentId },
    });
    const lines = (await api(acct, "get", "/api/v1/credits/transactions")).body.items as {
      description: string;
      amount: number;
      paymentId: string;
    }[];
    expect(lines[0]).toMatchObject({
      description: "Auto-recharge",
      amount: recharge!.amount,
      paymentId: open!.paymentIntentId,
    });
  });

  it("when 20 metering ticks run at once across the threshold while the player saves the settings, then one recharge is made, Stripe is called once for it, and 20 distinct succeeded events credit it once", async () => {
    const acct = await readyAccount(1_500, { threshold: 1_000, rechargeTo: 3_000, monthlyLimit: 10_000 });
    await play(acct);
    // Up to the last minute the balance stays at or above the threshold.
    while ((await balance(acct)) - RATE >= 1_000) {
      clock.advance(MINUTE);
      await meterRunningSessions(svc.deps);
    }
    expect(await rechargesOf(acct)).toEqual([]);
    clock.advance(MINUTE);
    await Promise.all([
      ...Array.from({ length: 20 }, () => meterRunningSessions(svc.deps)),
      api(acct, "patch", "/api/v1/credits/auto-recharge", { monthlyLimit: 20_000 }),
    ]);
    const recharges = await rechargesOf(acct);
    expect(recharges).toHaveLength(1);
    const callsBefore = charges.length;
    await Promise.all(Array.from({ length: 20 }, submit));
    const mine = charges.slice(callsBefore).filter((c) => c.accountId === acct);
    expect(mine.map((c) => c.rechargeId)).toEqual([recharges[0]!.id]);
    const [open] = await rechargesOf(acct);
    const before = await balance(acct);
    await Promise.all(Array.from({ length: 20 }, () => deliver(succeeded(open!, acct))));
    expect(await balance(acct)).toBe(before + open!.amount);
  });

  it("when three recharges in a row fail (a failed payment, a decline at once, one the bank wants confirmed), then auto-recharge turns itself off and says why; a late repeat of a failure counts nothing", async () => {
    const acct = await readyAccount(1_500, { threshold: 1_000, rechargeTo: 3_000, monthlyLimit: 50_000 });
    await play(acct);
    /** A manual top-up lifts the balance over the threshold, and play takes it under again. */
    const crossAgain = async () => {
      await creditWallet(svc.deps, acct, 1_000);
      await playUntilUnder(acct, 1_000);
    };

    await playUntilUnder(acct, 1_000);
    await submit();
    const first = (await rechargesOf(acct))[0]!;
    const declined = failed(first, acct, "Your card was declined.");
    await deliver(declined);
    let shown = (await api(acct, "get", "/api/v1/credits/auto-recharge")).body;
    expect(shown).toMatchObject({
      enabled: true,
      failuresInARow: 1,
      lastRecharge: { status: "failed", message: "Your card was declined." },
    });

    await crossAgain();
    declineNext = { accountId: acct, code: "card_declined", message: "Your card has insufficient funds." };
    await submit();
    shown = (await api(acct, "get", "/api/v1/credits/auto-recharge")).body;
    expect(shown).toMatchObject({
      enabled: true,
      failuresInARow: 2,
      lastRecharge: { status: "failed", message: "Your card has insufficient funds." },
    });

    await crossAgain();
    await submit();
    const third = (await rechargesOf(acct)).at(-1)!;
    await deliver(
      stripeEvent("payment_intent.requires_action", { ...intent(third, acct), status: "requires_action" }),
    );
    shown = (await api(acct, "get", "/api/v1/credits/auto-recharge")).body;
    expect(shown).toMatchObject({
      enabled: false,
      failuresInARow: 3,
      lastRecharge: { status: "requires_action" },
    });
    expect(shown.turnedOffReason).toMatch(
      /^Turned off after 3 failed recharges in a row; the last: "Your bank asks/,
    );

    // Stripe redelivers the first failure under a new event id: still three.
    await deliver(failed(first, acct, "Your card was declined."));
    await crossAgain();
    expect(await rechargesOf(acct)).toHaveLength(3);
    expect((await api(acct, "get", "/api/v1/credits/auto-recharge")).body.failuresInARow).toBe(3);

    // Turned on again by the player: the count starts over.
    const on = await api(acct, "patch", "/api/v1/credits/auto-recharge", { enabled: true });
    expect(on.body).toMatchObject({ enabled: true, failuresInARow: 0, turnedOffReason: null });
  });

  it("when the next recharge would pass the monthly recharge limit, then none is made and the reason is shown; in the next month it recharges again", async () => {
    const acct = await readyAccount(1_500, { threshold: 1_000, rechargeTo: 3_000, monthlyLimit: 4_000 });
    const { stop } = await play(acct);
    await playUntilUnder(acct, 1_000);
    await submit();
    const [first] = await rechargesOf(acct);
    await deliver(succeeded(first!, acct));
    await playUntilUnder(acct, 1_000, 40);
    expect(await rechargesOf(acct)).toHaveLength(1);
    const shown = (await api(acct, "get", "/api/v1/credits/auto-recharge")).body;
    expect(shown).toMatchObject({ enabled: true, rechargedThisMonth: first!.amount });
    expect(shown.skippedReason).toMatch(
      /^Not recharged on 2026-11-\d\d at \d\d:\d\d UTC: \d+\.\d\d USD more would pass your monthly recharge limit of 40\.00 USD \(\d+\.\d\d USD recharged this month\)/,
    );

    // The player stops 10 s into the minute that took the balance under the threshold: it stays charged.
    clock.advance(10_000);
    await consume(stop());
    expect(await balance(acct)).toBeLessThan(1_000);
    clock.set("2026-12-01T00:05:00.000Z");
    const renewed = await api(acct, "patch", "/api/v1/credits/auto-recharge", { monthlyLimit: 4_000 });
    expect(renewed.body.skippedReason).toBeNull();
    expect((await rechargesOf(acct)).filter((r) => r.status === "creating")).toHaveLength(1);
  });

  it("when a recharge is refunded or disputed, then the existing rules apply: the credit is taken back, a dispute blocks starts, and a disputed recharge turns auto-recharge off", async () => {
    const acct = await readyAccount(1_500, { threshold: 1_000, rechargeTo: 3_000, monthlyLimit: 50_000 });
    const { stop } = await play(acct);
    await playUntilUnder(acct, 1_000);
    await submit();
    const [recharge] = await rechargesOf(acct);
    await deliver(succeeded(recharge!, acct));
    await consume(stop());
    const before = await balance(acct);
    await deliver(
      stripeEvent("charge.refunded", {
        id: `ch_${randomUUID().slice(0, 8)}`,
        object: "charge",
        payment_intent: recharge!.paymentIntentId,
        amount_refunded: 500,
        currency: "usd",
      }),
    );
    expect(await balance(acct)).toBe(before - 500);
    await deliver(
      stripeEvent("charge.dispute.created", {
        id: `dp_${randomUUID().slice(0, 8)}`,
        object: "dispute",
        payment_intent: recharge!.paymentIntentId,
        amount: recharge!.amount,
        currency: "usd",
        status: "needs_response",
      }),
    );
    await expect(
      authorizeStart(svc.deps, acct, {
        sessionId: `s-${randomUUID()}`,
        ratePerMinute: RATE,
        currency: "USD",
      }),
    ).rejects.toMatchObject({ code: "INSUFFICIENT_CREDITS", message: expect.stringContaining("disputed") });
    const shown = (await api(acct, "get", "/api/v1/credits/auto-recharge")).body;
    expect(shown).toMatchObject({
      enabled: false,
      turnedOffReason: "Turned off because a recharge was disputed.",
    });
  });

  it("when a recharge succeeds after the account was purged, then it is not credited but refunded through Stripe (outside the transaction), once", async () => {
    const acct = await readyAccount(1_500, { threshold: 1_000, rechargeTo: 3_000, monthlyLimit: 50_000 });
    await play(acct);
    await playUntilUnder(acct, 1_000);
    await submit();
    const [recharge] = await rechargesOf(acct);
    await svc.database.withTransaction((tx) => closeWallet(tx, svc.deps, acct));
    const before = await balance(acct);
    const paid = succeeded(recharge!, acct);
    await deliver(paid);
    await deliver(paid);
    expect(await balance(acct)).toBe(before);
    expect(refunds.filter((r) => r.paymentIntentId === recharge!.paymentIntentId)).toEqual([
      { paymentIntentId: recharge!.paymentIntentId, idempotencyKey: `cgs-closed-wallet-${recharge!.id}` },
    ]);
    expect((await rechargesOf(acct))[0]!.status).toBe("refunded_closed_wallet");
    // The purge also took the card out of use; the auto-recharge pass detaches it from Stripe's customer.
    expect((await api(acct, "get", "/api/v1/credits/auto-recharge")).body).toMatchObject({
      enabled: false,
      paymentMethod: null,
    });
    const detachedBefore = detached.length;
    expect(await detachRetiredCards({ ...svc.deps, payments })).toBeGreaterThanOrEqual(1);
    expect(detached.length).toBeGreaterThan(detachedBefore);
    const cards = await svc.database.db
      .select({ status: paymentMethodsTable.status })
      .from(paymentMethodsTable)
      .where(eq(paymentMethodsTable.accountId, acct));
    expect(cards).toEqual([{ status: "detached" }]);
  });

  it("when the player removes the card, then auto-recharge turns off saying why, the card is detached at Stripe, and removing again is 404", async () => {
    const acct = await readyAccount(5_000, { threshold: 1_000, rechargeTo: 3_000, monthlyLimit: 10_000 });
    const before = detached.length;
    const removed = await api(acct, "delete", "/api/v1/credits/payment-method");
    expect(removed.status).toBe(204);
    expect(detached.length).toBe(before + 1);
    expect((await api(acct, "get", "/api/v1/credits/auto-recharge")).body).toMatchObject({
      enabled: false,
      paymentMethod: null,
      turnedOffReason: "Turned off because the saved card was removed.",
    });
    expect((await api(acct, "delete", "/api/v1/credits/payment-method")).status).toBe(404);
    const cards = await svc.database.db
      .select({ status: paymentMethodsTable.status })
      .from(paymentMethodsTable)
      .where(eq(paymentMethodsTable.accountId, acct));
    expect(cards).toEqual([{ status: "detached" }]);
  });

  it("when auto-recharge is turned on with the balance already under the threshold, then it recharges at once", async () => {
    const acct = account();
    await creditWallet(svc.deps, acct, 700 + STORAGE);
    await saveCard(acct);
    await api(acct, "patch", "/api/v1/credits/auto-recharge", {
      enabled: true,
      threshold: 1_000,
      rechargeTo: 2_500,
      monthlyLimit: 10_000,
    });
    expect(await rechargesOf(acct)).toEqual([expect.objectContaining({ status: "creating", amount: 1_800 })]);
  });
});
