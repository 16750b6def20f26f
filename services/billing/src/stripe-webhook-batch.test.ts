import { randomUUID } from "node:crypto";
import { eq, inArray } from "drizzle-orm";
import { Client } from "pg";
import type Stripe from "stripe";
import {
  ledgerEntriesTable,
  paymentReviewsTable,
  stripeEventsTable,
  topupsTable,
  walletsTable,
} from "./data/billing-tables";
import { findLedgerMismatches } from "./data/wallet-repository";
import { closeWallet } from "./domain/account-closure";
import { readWallet } from "./domain/wallets";
import { startBillingTestService, type BillingTestService } from "./testing/billing-harness";
import { checkoutEvent, placeTopup, postSignedEvent, type PlacedTopup } from "./testing/wallet-fixtures";

// Concurrent deliveries go through the webhook's group commit (several paid checkouts per transaction); these
// tests hold it to the per-event rules: each top-up credited once, the odd event answered as before, and a
// database failure answered as an error that a redelivery repairs.
jest.setTimeout(120_000);

async function post(url: string, event: Stripe.Event): Promise<number> {
  return (await postSignedEvent(url, event)).status;
}

/** Delivers every event once, `concurrency` at a time, in the given order; the statuses in that order. */
async function deliverAll(url: string, events: Stripe.Event[], concurrency = 32): Promise<number[]> {
  const statuses: number[] = new Array<number>(events.length);
  let next = 0;
  const worker = async () => {
    while (next < events.length) {
      const i = next++;
      statuses[i] = await post(url, events[i]!).catch(() => 0);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return statuses;
}

async function balanceOf(svc: BillingTestService, accountId: string): Promise<number | undefined> {
  const rows = await svc.database.db.select().from(walletsTable).where(eq(walletsTable.accountId, accountId));
  return rows[0]?.balance;
}

async function topupCredits(svc: BillingTestService, placed: PlacedTopup[]) {
  const references = placed.map((p) => `topup:${p.checkoutSessionId}`);
  return svc.database.db
    .select()
    .from(ledgerEntriesTable)
    .where(inArray(ledgerEntriesTable.reference, references));
}

describe("Stripe webhook under concurrent deliveries (group commit, real PostgreSQL)", () => {
  let svc: BillingTestService;
  beforeAll(async () => {
    svc = await startBillingTestService({ env: { STORAGE_DEFAULT_TIER: "none" } });
  });
  afterAll(() => svc.close());

  it("when 300 paid checkouts for 20 accounts arrive concurrently, some delivered twice at the same time, then each top-up is credited exactly once, every wallet's balance equals its top-ups and the ledger reconciles", async () => {
    const accounts = Array.from({ length: 20 }, () => `acct-burst-${randomUUID()}`);
    // Half the wallets exist (a top-up opened through the API creates it), half are created by the first credit.
    for (const accountId of accounts.slice(0, 10)) await readWallet(svc.deps, accountId);
    const placed: PlacedTopup[] = [];
    for (let i = 0; i < 300; i++) placed.push(await placeTopup(svc.deps, accounts[i % 20]!, 100 + i));
    const deliveries: Stripe.Event[] = [];
    placed.forEach((p, i) => {
      deliveries.push(p.paid);
      if (i % 4 === 0) deliveries.push(p.paid);
      if (i % 7 === 0) {
        deliveries.push(
          checkoutEvent({
            type: "checkout.session.async_payment_succeeded",
            accountId: accounts[i % 20]!,
            amount: 100 + i,
            checkoutSessionId: p.checkoutSessionId,
            topupId: p.topupId,
            paymentIntentId: p.paymentIntentId,
          }),
        );
      }
    });

    const statuses = await deliverAll(svc.url, deliveries);

    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    const credits = await topupCredits(svc, placed);
    expect(credits).toHaveLength(300);
    for (const [a, accountId] of accounts.entries()) {
      const toppedUp = placed.reduce((sum, _, i) => (i % 20 === a ? sum + 100 + i : sum), 0);
      expect(await balanceOf(svc, accountId)).toBe(toppedUp);
    }
    const topups = await svc.database.db
      .select()
      .from(topupsTable)
      .where(
        inArray(
          topupsTable.id,
          placed.map((p) => p.topupId),
        ),
      );
    expect(topups.filter((t) => t.status !== "paid")).toEqual([]);
    const recorded = await svc.database.db
      .select()
      .from(stripeEventsTable)
      .where(inArray(stripeEventsTable.eventId, [...new Set(deliveries.map((e) => e.id))]));
    expect(recorded).toHaveLength(new Set(deliveries.map((e) => e.id)).size);
    expect(recorded.filter((r) => r.outcome === "credited")).toHaveLength(300);
    expect(recorded.filter((r) => r.outcome !== "credited" && r.outcome !== "already_credited")).toEqual([]);
    expect(await findLedgerMismatches(svc.database.db)).toEqual([]);
  });

  it("when one checkout in a concurrent burst does not match its top-up and another reaches a closed wallet, then the others are still credited and those two get their documented outcomes", async () => {
    const accountId = `acct-poison-${randomUUID()}`;
    const closedAccount = `acct-poison-closed-${randomUUID()}`;
    await readWallet(svc.deps, accountId);
    const good: PlacedTopup[] = [];
    for (let i = 0; i < 40; i++) good.push(await placeTopup(svc.deps, accountId, 1_000 + i));
    const mismatched = await placeTopup(svc.deps, accountId, 5_000);
    const wrongAmount = checkoutEvent({
      accountId,
      amount: 50_000,
      checkoutSessionId: mismatched.checkoutSessionId,
      topupId: mismatched.topupId,
      paymentIntentId: mismatched.paymentIntentId,
    });
    await readWallet(svc.deps, closedAccount);
    const late = await placeTopup(svc.deps, closedAccount, 3_000);
    await svc.database.db.transaction((tx) => closeWallet(tx, svc.deps, closedAccount));
    const deliveries = [...good.slice(0, 20).map((p) => p.paid), wrongAmount, late.paid];
    deliveries.push(...good.slice(20).map((p) => p.paid));

    const statuses = await deliverAll(svc.url, deliveries);

    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    expect(await balanceOf(svc, accountId)).toBe(good.reduce((sum, _, i) => sum + 1_000 + i, 0));
    expect(await topupCredits(svc, good)).toHaveLength(40);
    const outcome = async (eventId: string) =>
      (
        await svc.database.db.select().from(stripeEventsTable).where(eq(stripeEventsTable.eventId, eventId))
      )[0]?.outcome;
    expect(await outcome(wrongAmount.id)).toBe("needs_review");
    const reviews = await svc.database.db
      .select()
      .from(paymentReviewsTable)
      .where(eq(paymentReviewsTable.stripeEventId, wrongAmount.id));
    expect(reviews).toHaveLength(1);
    expect(await outcome(late.paid.id)).toBe("refunded_closed_wallet");
    const [lateTopup] = await svc.database.db
      .select()
      .from(topupsTable)
      .where(eq(topupsTable.id, late.topupId));
    expect(lateTopup?.status).toBe("refunded_closed_wallet");
    const [mismatchedTopup] = await svc.database.db
      .select()
      .from(topupsTable)
      .where(eq(topupsTable.id, mismatched.topupId));
    expect(mismatchedTopup?.status).toBe("open");
    expect(await balanceOf(svc, closedAccount)).toBe(0);
    expect(await findLedgerMismatches(svc.database.db)).toEqual([]);
  });
});

describe("Stripe webhook when the database fails mid-batch (cuttable proxy, real PostgreSQL)", () => {
  let svc: BillingTestService;
  beforeAll(async () => {
    svc = await startBillingTestService({ env: { STORAGE_DEFAULT_TIER: "none" }, databaseProxy: true });
  });
  afterAll(() => svc.close());

  it("when the connection to PostgreSQL is cut while batches wait inside their transaction, then every affected delivery answers an error, and redelivering them credits each top-up once", async () => {
    const accountId = `acct-cut-${randomUUID()}`;
    await readWallet(svc.deps, accountId);
    const placed: PlacedTopup[] = [];
    for (let i = 0; i < 12; i++) placed.push(await placeTopup(svc.deps, accountId, 700 + i));
    // A direct connection (not through the proxy) holds the wallet's lock, so every batch stops inside its
    // transaction, after recording its event ids and locking its top-ups, waiting for the wallet.
    const direct = new Client({ connectionString: svc.config.DATABASE_URL });
    await direct.connect();
    const watcher = new Client({ connectionString: svc.config.DATABASE_URL });
    await watcher.connect();
    try {
      await direct.query("begin");
      await direct.query("select 1 from wallets where account_id = $1 for update", [accountId]);
      const inFlight = deliverAll(
        svc.url,
        placed.map((p) => p.paid),
        12,
      );
      for (;;) {
        const waiting = await watcher.query<{ n: number }>(
          "select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'",
        );
        if (waiting.rows[0]!.n > 0) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      await svc.databaseProxy!.cut();

      const statuses = await inFlight;

      expect(statuses.filter((s) => s < 500)).toEqual([]);
      await direct.query("rollback");
      await svc.databaseProxy!.restore();
      expect(await balanceOf(svc, accountId)).toBe(0);

      const again = await deliverAll(
        svc.url,
        placed.map((p) => p.paid),
        12,
      );

      expect(again.filter((s) => s !== 200)).toEqual([]);
      expect(await topupCredits(svc, placed)).toHaveLength(12);
      expect(await balanceOf(svc, accountId)).toBe(placed.reduce((sum, _, i) => sum + 700 + i, 0));
      expect(await findLedgerMismatches(svc.database.db)).toEqual([]);
    } finally {
      await direct.end().catch(() => undefined);
      await watcher.end().catch(() => undefined);
    }
  });
});
