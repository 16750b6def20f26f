import { createOutboxPublisher, systemClock } from "@cgs/shared";
import { randomUUID } from "node:crypto";
import { eq, sql } from "drizzle-orm";
import pino from "pino";
import { walletsTable } from "./data/billing-tables";
import { findLedgerMismatches, lockWallet, postLedgerEntry } from "./data/wallet-repository";
import {
  billingTestConfig,
  openBillingTestDatabase,
  type BillingDatabaseFixture,
} from "./testing/billing-harness";
import { creditWallet } from "./testing/wallet-fixtures";
import { billingSettings, type BillingDeps } from "./domain/billing-deps";
import { authorizeStart, releaseStartAuthorization } from "./domain/start-authorization";
import { lockOrCreateWallet } from "./domain/wallets";

describe("wallet and ledger under concurrency (real PostgreSQL)", () => {
  let fixture: BillingDatabaseFixture;
  let deps: BillingDeps;

  beforeAll(async () => {
    fixture = await openBillingTestDatabase("billing_concurrency", 20);
    deps = {
      db: fixture.database.db,
      settings: billingSettings(billingTestConfig({ STORAGE_DEFAULT_TIER: "none" })),
      publisher: createOutboxPublisher(),
      logger: pino({ level: "silent" }),
      clock: systemClock,
    };
  });
  afterAll(() => fixture.close());

  const walletOf = async (accountId: string) =>
    (await fixture.database.db.select().from(walletsTable).where(eq(walletsTable.accountId, accountId)))[0]!;

  const debit = (accountId: string, amount: number) =>
    fixture.database.withTransaction(async (tx) => {
      const wallet = await lockOrCreateWallet(tx, deps, accountId);
      if (wallet.balance - wallet.held < amount) return false;
      const posted = await postLedgerEntry(tx, wallet, {
        kind: "usage",
        reference: `usage:test:${randomUUID()}`,
        amount: -amount,
      });
      return posted.applied;
    });

  it("when 200 debits of 7 race on a balance of 1,000, then exactly 142 succeed and the balance never goes negative", async () => {
    const accountId = `acct-${randomUUID()}`;
    await creditWallet(deps, accountId, 1_000);
    const results = await Promise.all(Array.from({ length: 200 }, () => debit(accountId, 7)));
    expect(results.filter(Boolean)).toHaveLength(142);
    expect((await walletOf(accountId)).balance).toBe(1_000 - 142 * 7);
    expect(await findLedgerMismatches(fixture.database.db)).toEqual([]);
  });

  it("when debits, holds, releases and credits interleave across accounts, then no balance or spendable amount goes negative and the ledger sum always equals the balance", async () => {
    const accounts = Array.from({ length: 4 }, () => `acct-mix-${randomUUID()}`);
    for (const a of accounts) await creditWallet(deps, a, 3_000);
    const violations: string[] = [];
    let sampling = true;
    // Sample the invariants while the storm runs, not only at the end.
    const sampler = (async () => {
      while (sampling) {
        const mismatches = await findLedgerMismatches(fixture.database.db);
        if (mismatches.length > 0) violations.push(JSON.stringify(mismatches));
        const rows = await fixture.database.db.select().from(walletsTable);
        for (const w of rows)
          if (w.balance < 0 || w.held < 0 || w.held > w.balance) violations.push(JSON.stringify(w));
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    const ops = Array.from({ length: 400 }, (_, i) => async () => {
      const accountId = accounts[i % accounts.length]!;
      switch (i % 4) {
        case 0:
          return debit(accountId, 13 + (i % 50));
        case 1: {
          const auth = await authorizeStart(deps, accountId, {
            sessionId: `s-${randomUUID()}`,
            ratePerMinute: 10 + (i % 7),
            currency: "USD",
          }).catch((err: { code?: string }) => {
            if (err.code !== "INSUFFICIENT_CREDITS") throw err;
            return undefined;
          });
          if (auth && i % 8 === 1) await releaseStartAuthorization(deps, accountId, auth.authorizationId);
          return auth;
        }
        case 2:
          return debit(accountId, 101);
        default:
          return i % 40 === 3 ? creditWallet(deps, accountId, 500) : debit(accountId, 3);
      }
    });
    await Promise.all(ops.map((op) => op()));
    sampling = false;
    await sampler;
    expect(violations).toEqual([]);
    for (const a of accounts) {
      const w = await walletOf(a);
      expect(w.balance).toBeGreaterThanOrEqual(0);
      expect(w.held).toBeLessThanOrEqual(w.balance);
    }
    expect(await findLedgerMismatches(fixture.database.db)).toEqual([]);
  });

  it("when 50 starts race for a balance that covers 3 holds, then exactly 3 are authorized", async () => {
    const accountId = `acct-holds-${randomUUID()}`;
    await creditWallet(deps, accountId, 450);
    const outcomes = await Promise.allSettled(
      Array.from({ length: 50 }, (_, i) =>
        authorizeStart(deps, accountId, {
          sessionId: `race-${accountId}-${i}`,
          ratePerMinute: 10,
          currency: "USD",
        }),
      ),
    );
    expect(outcomes.filter((o) => o.status === "fulfilled")).toHaveLength(3);
    expect(
      outcomes
        .filter((o): o is PromiseRejectedResult => o.status === "rejected")
        .every((o) => (o.reason as { code?: string }).code === "INSUFFICIENT_CREDITS"),
    ).toBe(true);
    expect(await walletOf(accountId)).toMatchObject({ balance: 450, held: 450 });
  });

  it("when a write bypasses the repository and would make a balance negative, then PostgreSQL's CHECK refuses it", async () => {
    const accountId = `acct-check-${randomUUID()}`;
    await creditWallet(deps, accountId, 100);
    const constraintOf = (query: Promise<unknown>) =>
      query.then(
        () => "accepted",
        (err: { cause?: { constraint?: string } }) => err.cause?.constraint ?? String(err),
      );
    expect(
      await constraintOf(
        fixture.database.db.execute(sql`update wallets set balance = -1 where account_id = ${accountId}`),
      ),
    ).toBe("wallets_balance_non_negative");
    expect(
      await constraintOf(
        fixture.database.db.execute(sql`update wallets set held = 101 where account_id = ${accountId}`),
      ),
    ).toBe("wallets_held_within_balance");
  });

  it("when the same ledger reference is posted twice, then it is applied once", async () => {
    const accountId = `acct-dup-${randomUUID()}`;
    await creditWallet(deps, accountId, 100);
    const post = () =>
      fixture.database.withTransaction(async (tx) => {
        const wallet = (await lockWallet(tx, accountId))!;
        return postLedgerEntry(tx, wallet, {
          kind: "usage",
          reference: `usage:dup:${accountId}`,
          amount: -10,
        });
      });
    const results = await Promise.all([post(), post(), post()]);
    expect(results.filter((r) => r.applied)).toHaveLength(1);
    expect((await walletOf(accountId)).balance).toBe(90);
  });
});
