import { randomUUID } from "node:crypto";
import { eq } from "drizzle-orm";
import Stripe from "stripe";
import request from "supertest";
import { ledgerEntriesTable, stripeEventsTable, walletsTable } from "./data/billing-tables";
import { findLedgerMismatches } from "./data/wallet-repository";
import {
  startBillingTestService,
  TEST_WEBHOOK_SECRET,
  type BillingTestService,
} from "./testing/billing-harness";
import { createContractChecker } from "@cgs/shared/testing/contract";
import { checkoutEvent, placeTopup } from "./testing/wallet-fixtures";

const contract = createContractChecker();

const stripe = new Stripe("sk_test_billing");
const WEBHOOK = "/api/v1/billing/stripe-webhook";

function sign(payload: string, options: { secret?: string; timestamp?: number } = {}): string {
  return stripe.webhooks.generateTestHeaderString({
    payload,
    secret: options.secret ?? TEST_WEBHOOK_SECRET,
    timestamp: options.timestamp,
  });
}

describe("POST /api/v1/billing/stripe-webhook", () => {
  let svc: BillingTestService;
  beforeAll(async () => {
    svc = await startBillingTestService();
  });
  afterAll(() => svc.close());

  const deliver = (payload: string, signature?: string) => {
    const req = request(svc.url).post(WEBHOOK).set("content-type", "application/json");
    if (signature !== undefined) req.set("stripe-signature", signature);
    return req.send(payload);
  };
  const balanceOf = async (accountId: string) =>
    (await svc.database.db.select().from(walletsTable).where(eq(walletsTable.accountId, accountId)))[0]
      ?.balance ?? 0;
  const ledgerCount = async () => (await svc.database.db.select().from(ledgerEntriesTable)).length;

  it("when a paid checkout.session.completed is signed correctly, then 200 {received:true} and the wallet is credited", async () => {
    const accountId = `acct-${randomUUID()}`;
    const payload = JSON.stringify((await placeTopup(svc.deps, accountId, 2_500)).paid);
    const res = await deliver(payload, sign(payload));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ received: true });
    contract.assertResponse("POST", WEBHOOK, 200, res.body);
    // 2500 credited; the basic tier's 200 for this period is then settled from it.
    expect(await balanceOf(accountId)).toBe(2_300);
  });

  describe("signature checks", () => {
    const accountId = `acct-sig-${randomUUID()}`;
    const payload = JSON.stringify(checkoutEvent({ accountId, amount: 1_000 }));

    it.each([
      ["the body was altered after signing", () => [payload.replace("1000", "9000"), sign(payload)]],
      ["it was signed with another secret", () => [payload, sign(payload, { secret: "whsec_attacker" })]],
      [
        "its timestamp is older than the tolerance",
        () => [payload, sign(payload, { timestamp: Math.floor(Date.now() / 1000) - 301 })],
      ],
      ["the header is garbage", () => [payload, "t=1,v1=deadbeef"]],
    ])("when %s, then 400 VALIDATION_ERROR and nothing changes", async (_label, make) => {
      const before = await ledgerCount();
      const [body, signature] = make();
      const res = await deliver(body!, signature);
      expect(res.status).toBe(400);
      expect(res.body.error).toBe("VALIDATION_ERROR");
      expect(res.body.message).toContain("Stripe-Signature");
      contract.assertResponse("POST", WEBHOOK, 400, res.body);
      expect(await ledgerCount()).toBe(before);
      expect(await balanceOf(accountId)).toBe(0);
    });

    it("when the Stripe-Signature header is missing, then 400 naming it", async () => {
      const res = await deliver(payload);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: "VALIDATION_ERROR", message: "Stripe-Signature header is required" });
    });

    it("when the body is not JSON but correctly signed, then 400 and nothing changes", async () => {
      const body = "not json";
      const res = await deliver(body, sign(body));
      expect(res.status).toBe(400);
    });
  });

  it("when the checkout session is not paid yet, then 200 and nothing is credited; async_payment_succeeded credits it", async () => {
    const accountId = `acct-async-${randomUUID()}`;
    const { checkoutSessionId, topupId } = await placeTopup(svc.deps, accountId, 1_000);
    const unpaid = JSON.stringify(
      checkoutEvent({ accountId, amount: 1_000, checkoutSessionId, topupId, paymentStatus: "unpaid" }),
    );
    expect((await deliver(unpaid, sign(unpaid))).status).toBe(200);
    expect(await balanceOf(accountId)).toBe(0);
    const succeeded = JSON.stringify(
      checkoutEvent({
        accountId,
        amount: 1_000,
        checkoutSessionId,
        topupId,
        type: "checkout.session.async_payment_succeeded",
      }),
    );
    expect((await deliver(succeeded, sign(succeeded))).status).toBe(200);
    expect(await balanceOf(accountId)).toBe(800);
  });

  it("when async_payment_succeeded arrives before completed(paid), then the session is credited once", async () => {
    const accountId = `acct-order-${randomUUID()}`;
    const { checkoutSessionId, topupId } = await placeTopup(svc.deps, accountId, 700);
    const late = JSON.stringify(checkoutEvent({ accountId, amount: 700, checkoutSessionId, topupId }));
    const early = JSON.stringify(
      checkoutEvent({
        accountId,
        amount: 700,
        checkoutSessionId,
        topupId,
        type: "checkout.session.async_payment_succeeded",
      }),
    );
    expect((await deliver(early, sign(early))).status).toBe(200);
    expect((await deliver(late, sign(late))).status).toBe(200);
    expect(await balanceOf(accountId)).toBe(500);
  });

  it.each(["payment_intent.succeeded", "customer.created", "checkout.session.expired"])(
    "when an event of type %s arrives, then 200 and nothing changes",
    async (type) => {
      const accountId = `acct-unknown-${randomUUID()}`;
      const before = await ledgerCount();
      const payload = JSON.stringify(checkoutEvent({ accountId, amount: 1_000, type }));
      const res = await deliver(payload, sign(payload));
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ received: true });
      expect(await ledgerCount()).toBe(before);
      expect(await balanceOf(accountId)).toBe(0);
    },
  );

  it("when 1,000 shuffled deliveries of 50 paid sessions (duplicates and both event types) arrive concurrently, then each session credits exactly once", async () => {
    const accountId = `acct-storm-${randomUUID()}`;
    const sessions = await Promise.all(
      Array.from({ length: 50 }, async (_, i) => {
        const placed = await placeTopup(svc.deps, accountId, 500 + i);
        return { id: placed.checkoutSessionId, topupId: placed.topupId, amount: 500 + i };
      }),
    );
    const events = sessions.flatMap((s) => [
      checkoutEvent({ accountId, amount: s.amount, checkoutSessionId: s.id, topupId: s.topupId }),
      checkoutEvent({
        accountId,
        amount: s.amount,
        checkoutSessionId: s.id,
        topupId: s.topupId,
        type: "checkout.session.async_payment_succeeded",
      }),
      checkoutEvent({
        accountId,
        amount: s.amount,
        checkoutSessionId: s.id,
        topupId: s.topupId,
        paymentStatus: "unpaid",
      }),
    ]);
    // 150 distinct events, each delivered several times, 1,000 deliveries in random order.
    const deliveries = Array.from({ length: 1_000 }, (_, i) => events[i % events.length]!);
    for (let i = deliveries.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [deliveries[i], deliveries[j]] = [deliveries[j]!, deliveries[i]!];
    }
    let next = 0;
    const statuses: number[] = [];
    const worker = async () => {
      while (next < deliveries.length) {
        const payload = JSON.stringify(deliveries[next++]);
        statuses.push((await deliver(payload, sign(payload))).status);
      }
    };
    await Promise.all(Array.from({ length: 16 }, worker));
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    const expected = sessions.reduce((sum, s) => sum + s.amount, 0) - 200;
    expect(await balanceOf(accountId)).toBe(expected);
    const credits = await svc.database.db
      .select()
      .from(ledgerEntriesTable)
      .where(eq(ledgerEntriesTable.accountId, accountId));
    expect(credits.filter((e) => e.kind === "topup")).toHaveLength(50);
    const seen = await svc.database.db.select().from(stripeEventsTable);
    expect(new Set(seen.map((e) => e.eventId)).size).toBe(seen.length);
    expect(await findLedgerMismatches(svc.database.db)).toEqual([]);
  });
});
