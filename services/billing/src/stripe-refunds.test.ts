import { randomUUID } from "node:crypto";
import { eq, sql } from "drizzle-orm";
import Stripe from "stripe";
import request from "supertest";
import { createContractChecker } from "@cgs/shared/testing/contract";
import { paymentReviewsTable, stripeEventsTable, topupsTable, walletsTable } from "./data/billing-tables";
import { findLedgerMismatches } from "./data/wallet-repository";
import { closeWallet } from "./domain/account-closure";
import { finishPendingRefunds } from "./domain/stripe-events";
import { authorizeStart } from "./domain/start-authorization";
import { createStripeClient } from "./adapters/stripe-client";
import { createStripePaymentProvider } from "./adapters/stripe-payment-provider";
import type { RefundRequest } from "./adapters/payment-provider";
import { startBillingTestService, STRIPE_MOCK_URL, type BillingTestService } from "./testing/billing-harness";
import { checkoutEvent, placeTopup, postSignedEvent, stripeEvent } from "./testing/wallet-fixtures";

const contract = createContractChecker();
const WEBHOOK = "/api/v1/billing/stripe-webhook";
const STORAGE = 200; // the basic tier's charge for the current period, paid from the first top-up

const refunded = (paymentIntentId: string, amountRefunded: number) =>
  stripeEvent("charge.refunded", {
    id: `ch_${paymentIntentId.slice(3)}`,
    object: "charge",
    payment_intent: paymentIntentId,
    amount_refunded: amountRefunded,
    currency: "usd",
  });

const dispute = (type: string, id: string, paymentIntentId: string, amount: number, status: string) =>
  stripeEvent(type, {
    id,
    object: "dispute",
    charge: `ch_${paymentIntentId.slice(3)}`,
    payment_intent: paymentIntentId,
    amount,
    currency: "usd",
    status,
  });

describe("refunds, disputes and payments that must not be credited (real PostgreSQL, stripe-mock)", () => {
  let svc: BillingTestService;
  const refunds: RefundRequest[] = [];
  /** Every refund call billing made, and those that reached stripe-mock. */
  const refundCalls: RefundRequest[] = [];
  const reachedStripe: RefundRequest[] = [];
  /**
   * What the next refund call meets. A crash of billing between its steps cannot be produced on demand by the
   * real peers, so "before"/"after" fail the call before or after stripe-mock took it, as a crash would leave
   * it; "gate" holds the call until the test lets it go.
   */
  /** Billing's payment provider's refund call (the real adapter, recorded and faulted as above). */
  let refundVia: (r: RefundRequest) => Promise<void>;
  let refundFault:
    { kind: "before" | "after" } | { kind: "gate"; reached: () => void; until: Promise<void> } | undefined;

  beforeAll(async () => {
    // The real Stripe adapter against stripe-mock; the wrapper only records what billing asked Stripe to do.
    const stripe = createStripeClient({
      secretKey: "sk_test_billing",
      apiBase: STRIPE_MOCK_URL,
      timeoutMs: 5_000,
    });
    const real = createStripePaymentProvider(stripe);
    svc = await startBillingTestService({
      adapters: {
        payments: {
          ...real,
          refundPayment: (refundVia = async (r) => {
            refundCalls.push(r);
            const fault = refundFault;
            refundFault = undefined;
            if (fault?.kind === "before") throw new Error("billing stopped before calling Stripe");
            if (fault?.kind === "gate") {
              fault.reached();
              await fault.until;
            }
            await real.refundPayment(r);
            reachedStripe.push(r);
            if (fault?.kind === "after") throw new Error("billing stopped after Stripe refunded");
            refunds.push(r);
          }),
        },
      },
    });
  });
  afterAll(() => svc.close());

  const send = (event: Stripe.Event) => postSignedEvent(svc.url, event);
  const deliver = async (event: Stripe.Event) => {
    const res = await send(event);
    expect(res.status).toBe(200);
    contract.assertResponse("POST", WEBHOOK, 200, res.body);
  };
  const wallet = async (accountId: string) => {
    const row = (
      await svc.database.db.select().from(walletsTable).where(eq(walletsTable.accountId, accountId))
    )[0];
    return { balance: row?.balance ?? 0, shortfall: row?.shortfall ?? 0, held: row?.held ?? 0 };
  };
  const topUp = async (accountId: string, amount: number) => {
    const placed = await placeTopup(svc.deps, accountId, amount);
    await deliver(placed.paid);
    return placed;
  };
  const start = (accountId: string) =>
    authorizeStart(svc.deps, accountId, { sessionId: randomUUID(), ratePerMinute: 10, currency: "USD" });
  const transactions = async (accountId: string) => {
    const res = await request(svc.url)
      .get("/api/v1/credits/transactions")
      .set("authorization", `Bearer ${await svc.token(accountId)}`);
    expect(res.status).toBe(200);
    contract.assertResponse("GET", "/api/v1/credits/transactions", 200, res.body);
    return res.body.items as Array<{
      type: string;
      amount: number;
      balanceAfter: number;
      paymentId: string | null;
    }>;
  };
  const account = () => `acct-money-${randomUUID()}`;

  afterEach(async () => {
    expect(await findLedgerMismatches(svc.database.db)).toEqual([]);
  });

  it("when an unspent top-up is refunded in full, then its credit is taken back and nothing is owed", async () => {
    const acct = account();
    await topUp(acct, 2_000);
    const second = await topUp(acct, 1_000);
    expect(await wallet(acct)).toEqual({ balance: 2_800, shortfall: 0, held: 0 });
    await deliver(refunded(second.paymentIntentId, 1_000));
    expect(await wallet(acct)).toEqual({ balance: 1_800, shortfall: 0, held: 0 });
    const [latest] = await transactions(acct);
    expect(latest).toMatchObject({ type: "refund", amount: -1_000, balanceAfter: 1_800 });
    await expect(start(acct)).resolves.toMatchObject({ holdAmount: 150 });
  });

  it("when a top-up is refunded in two parts, then each part is taken back once, whatever order and however often the events arrive", async () => {
    const acct = account();
    const { paymentIntentId } = await topUp(acct, 2_000);
    await deliver(refunded(paymentIntentId, 300));
    expect((await wallet(acct)).balance).toBe(2_000 - STORAGE - 300);
    const second = refunded(paymentIntentId, 800);
    await deliver(second);
    await deliver(second);
    // An older (smaller cumulative) event arriving late changes nothing.
    await deliver(refunded(paymentIntentId, 300));
    expect(await wallet(acct)).toEqual({ balance: 2_000 - STORAGE - 800, shortfall: 0, held: 0 });
    const refundsSeen = (await transactions(acct)).filter((t) => t.type === "refund");
    expect(refundsSeen.map((t) => t.amount)).toEqual([-500, -300]);
  });

  it("when a refund takes back credit already spent, then the balance stops at zero, the rest is a shortfall that blocks starts, and the next top-up settles it first", async () => {
    const acct = account();
    const { paymentIntentId } = await topUp(acct, 1_000);
    expect((await wallet(acct)).balance).toBe(800); // storage already spent 200 of it
    await deliver(refunded(paymentIntentId, 1_000));
    expect(await wallet(acct)).toEqual({ balance: 0, shortfall: 200, held: 0 });
    await expect(start(acct)).rejects.toMatchObject({ code: "INSUFFICIENT_CREDITS" });
    await topUp(acct, 1_000);
    expect(await wallet(acct)).toEqual({ balance: 800, shortfall: 0, held: 0 });
    const [latest] = await transactions(acct);
    expect(latest).toMatchObject({ type: "topup", amount: 1_000, balanceAfter: 800 });
    await expect(start(acct)).resolves.toMatchObject({ holdAmount: 150 });
  });

  it("when a refund arrives while a session holds credit, then the hold is untouched and only the spendable part is taken", async () => {
    const acct = account();
    const first = await topUp(acct, 500); // 300 after storage
    await start(acct); // holds 150
    await deliver(refunded(first.paymentIntentId, 500));
    expect(await wallet(acct)).toEqual({ balance: 150, shortfall: 350, held: 150 });
  });

  it("when a dispute is opened and then won, then starts are blocked until it closes and no credit moves", async () => {
    const acct = account();
    const { paymentIntentId } = await topUp(acct, 2_000);
    const id = `dp_${randomUUID().replace(/-/g, "")}`;
    await deliver(dispute("charge.dispute.created", id, paymentIntentId, 2_000, "needs_response"));
    await expect(start(acct)).rejects.toMatchObject({
      code: "INSUFFICIENT_CREDITS",
      message: expect.stringContaining("disputed"),
    });
    await deliver(dispute("charge.dispute.closed", id, paymentIntentId, 2_000, "won"));
    expect(await wallet(acct)).toEqual({ balance: 1_800, shortfall: 0, held: 0 });
    await expect(start(acct)).resolves.toMatchObject({ holdAmount: 150 });
  });

  it("when a dispute is lost, then its credit is taken back, what was spent becomes a shortfall, and the ledger shows it", async () => {
    const acct = account();
    const { paymentIntentId } = await topUp(acct, 2_000);
    const id = `dp_${randomUUID().replace(/-/g, "")}`;
    await deliver(dispute("charge.dispute.created", id, paymentIntentId, 2_000, "needs_response"));
    const lost = dispute("charge.dispute.closed", id, paymentIntentId, 2_000, "lost");
    await deliver(lost);
    await deliver(lost);
    expect(await wallet(acct)).toEqual({ balance: 0, shortfall: 200, held: 0 });
    const [latest] = await transactions(acct);
    expect(latest).toMatchObject({ type: "dispute", amount: -2_000, balanceAfter: 0, paymentId: id });
    await expect(start(acct)).rejects.toMatchObject({ code: "INSUFFICIENT_CREDITS" });
  });

  it("when a payment reaches a closed wallet, then it is refunded through Stripe once and never credited", async () => {
    const acct = account();
    await topUp(acct, 1_000);
    const late = await placeTopup(svc.deps, acct, 3_000);
    await svc.database.db.transaction((tx) => closeWallet(tx, svc.deps, acct));
    const before = await wallet(acct);
    await deliver(late.paid);
    await deliver(late.paid);
    expect(await wallet(acct)).toEqual(before);
    expect(refunds.filter((r) => r.paymentIntentId === late.paymentIntentId)).toEqual([
      { paymentIntentId: late.paymentIntentId, idempotencyKey: `cgs-closed-wallet-${late.topupId}` },
    ]);
    const row = (await svc.database.db.select().from(topupsTable).where(eq(topupsTable.id, late.topupId)))[0];
    expect(row?.status).toBe("refunded_closed_wallet");
  });

  const topupStatus = async (topupId: string) =>
    (await svc.database.db.select().from(topupsTable).where(eq(topupsTable.id, topupId)))[0]?.status;
  const eventOutcome = async (eventId: string) =>
    (await svc.database.db.select().from(stripeEventsTable).where(eq(stripeEventsTable.eventId, eventId)))[0]
      ?.outcome;
  const closedWalletPayment = async () => {
    const acct = account();
    await topUp(acct, 1_000);
    const late = await placeTopup(svc.deps, acct, 3_000);
    await svc.database.db.transaction((tx) => closeWallet(tx, svc.deps, acct));
    return { acct, late };
  };

  it("when Stripe's refund call is under way, then neither the wallet nor the top-up is locked", async () => {
    const { acct, late } = await closedWalletPayment();
    let reached!: () => void;
    let release!: () => void;
    const atStripe = new Promise<void>((r) => (reached = r));
    refundFault = { kind: "gate", reached, until: new Promise<void>((r) => (release = r)) };
    const delivery = send(late.paid).then((res) => res.status);
    await atStripe;
    try {
      // Another transaction takes both rows at once: NOWAIT fails with lock_not_available if the refund held them.
      await svc.database.db.transaction(async (tx) => {
        await tx.execute(sql`select 1 from wallets where account_id = ${acct} for update nowait`);
        await tx.execute(sql`select 1 from topups where id = ${late.topupId} for update nowait`);
      });
      expect(await topupStatus(late.topupId)).toBe("refund_pending");
    } finally {
      release();
    }
    expect(await delivery).toBe(200);
    expect(await topupStatus(late.topupId)).toBe("refunded_closed_wallet");
    expect(await eventOutcome(late.paid.id)).toBe("refunded_closed_wallet");
  });

  it.each([
    ["before Stripe was called", "before" as const, 1],
    ["after Stripe refunded", "after" as const, 2],
  ])(
    "when billing stops %s, then Stripe's redelivery finishes the refund with the same idempotency key and records it once",
    async (_when, kind, stripeCalls) => {
      const { acct, late } = await closedWalletPayment();
      const before = await wallet(acct);
      refundFault = { kind };
      expect((await send(late.paid)).status).toBe(500);
      // The intent survived the failure: the event is not a duplicate yet, the top-up is not credited.
      expect(await topupStatus(late.topupId)).toBe("refund_pending");
      expect(await eventOutcome(late.paid.id)).toBe("refund_pending");
      await deliver(late.paid);
      await deliver(late.paid);
      expect(await topupStatus(late.topupId)).toBe("refunded_closed_wallet");
      expect(await eventOutcome(late.paid.id)).toBe("refunded_closed_wallet");
      const same = {
        paymentIntentId: late.paymentIntentId,
        idempotencyKey: `cgs-closed-wallet-${late.topupId}`,
      };
      const mine = (calls: RefundRequest[]) =>
        calls.filter((r) => r.paymentIntentId === late.paymentIntentId);
      expect(mine(refundCalls)).toEqual([same, same]);
      expect(mine(reachedStripe)).toEqual(Array(stripeCalls).fill(same));
      expect(await wallet(acct)).toEqual(before);
    },
  );

  it("when billing stops before Stripe was called and Stripe never redelivers the event, then the refund pass finishes it once with the same idempotency key", async () => {
    const { acct, late } = await closedWalletPayment();
    const before = await wallet(acct);
    refundFault = { kind: "before" };
    expect((await send(late.paid)).status).toBe(500);
    expect(await topupStatus(late.topupId)).toBe("refund_pending");
    const payments = { refundPayment: (r: RefundRequest) => refundVia(r) };

    refundFault = { kind: "before" };
    await finishPendingRefunds(svc.deps, payments);
    // Stripe failing again leaves the intent for the next pass.
    expect(await topupStatus(late.topupId)).toBe("refund_pending");
    await finishPendingRefunds(svc.deps, payments);
    await finishPendingRefunds(svc.deps, payments);

    expect(await topupStatus(late.topupId)).toBe("refunded_closed_wallet");
    const same = {
      paymentIntentId: late.paymentIntentId,
      idempotencyKey: `cgs-closed-wallet-${late.topupId}`,
    };
    expect(reachedStripe.filter((r) => r.paymentIntentId === late.paymentIntentId)).toEqual([same]);
    expect(await wallet(acct)).toEqual(before);
    // A redelivery arriving after all finds the refund done and records the event's outcome.
    await deliver(late.paid);
    expect(await eventOutcome(late.paid.id)).toBe("refunded_closed_wallet");
  });

  it.each([
    [
      "no top-up was created for it",
      (acct: string) => Promise.resolve(checkoutEvent({ accountId: acct, amount: 1_000 })),
    ],
    [
      "its amount differs from the top-up",
      async (acct: string) => {
        const placed = await placeTopup(svc.deps, acct, 1_000);
        return checkoutEvent({ ...placed, accountId: acct, amount: 9_000 });
      },
    ],
    [
      "it names another account than the top-up",
      async (acct: string) => {
        const placed = await placeTopup(svc.deps, `${acct}-other`, 1_000);
        return checkoutEvent({ ...placed, accountId: acct, amount: 1_000 });
      },
    ],
    [
      "its currency differs from the top-up",
      async (acct: string) => {
        const placed = await placeTopup(svc.deps, acct, 1_000);
        return checkoutEvent({ ...placed, accountId: acct, amount: 1_000, currency: "EUR" });
      },
    ],
  ])(
    "when a paid checkout arrives and %s, then it is recorded for review and nothing is credited",
    async (_l, make) => {
      const acct = account();
      const event = await make(acct);
      await deliver(event);
      expect((await wallet(acct)).balance).toBe(0);
      const reviews = await svc.database.db
        .select()
        .from(paymentReviewsTable)
        .where(eq(paymentReviewsTable.stripeEventId, event.id));
      expect(reviews).toHaveLength(1);
      expect(await transactions(acct)).toEqual(
        expect.not.arrayContaining([expect.objectContaining({ type: "topup" })]),
      );
    },
  );
});
