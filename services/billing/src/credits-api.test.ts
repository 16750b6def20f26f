import { eq } from "drizzle-orm";
import request from "supertest";
import { holdsTable, topupsTable, walletsTable } from "./data/billing-tables";
import { findLedgerMismatches } from "./data/wallet-repository";
import { startBillingTestService, type BillingTestService } from "./testing/billing-harness";
import { createContractChecker } from "@cgs/shared/testing/contract";
import { creditWallet } from "./testing/wallet-fixtures";

const contract = createContractChecker();

describe("billing HTTP API", () => {
  let svc: BillingTestService;
  let token: string;
  const user = "user-credits";

  beforeAll(async () => {
    svc = await startBillingTestService({ clock: undefined });
    token = await svc.token(user);
  });
  afterAll(() => svc.close());

  const api = () => request(svc.url);

  describe("GET /api/v1/credits/me", () => {
    it("when a new account asks, then it gets an empty wallet in the contract's shape", async () => {
      const res = await api().get("/api/v1/credits/me").set("authorization", `Bearer ${token}`);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        balance: 0,
        currency: "USD",
        minutesRemaining: 0,
        ratePerMinute: 10,
        storage: { tier: "basic", sizeGb: 50, usedGb: 0 },
      });
      contract.assertResponse("GET", "/api/v1/credits/me", 200, res.body);
    });

    it("when the wallet holds credits, then minutesRemaining is the whole minutes at the rate", async () => {
      await creditWallet(svc.deps, "user-rich", 1_234);
      const res = await api()
        .get("/api/v1/credits/me")
        .set("authorization", `Bearer ${await svc.token("user-rich")}`);
      // 1234 credited, then the basic tier's 200 for this period was taken at once.
      expect(res.body).toMatchObject({ balance: 1_034, minutesRemaining: 103 });
    });

    it("when no token is sent, then 401 UNAUTHENTICATED with the exact message", async () => {
      const res = await api().get("/api/v1/credits/me");
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ error: "UNAUTHENTICATED", message: "Missing or invalid bearer token" });
    });

    it("when the token is signed by an unknown key, then 401", async () => {
      const bad = await svc.idp.signWithUnpublishedKey({ sub: user });
      const res = await api().get("/api/v1/credits/me").set("authorization", `Bearer ${bad}`);
      expect(res.status).toBe(401);
    });
  });

  describe("GET /api/v1/billing/storage", () => {
    it("when asked, then it answers tier, price, currency, the calendar-month period and its status", async () => {
      const res = await api().get("/api/v1/billing/storage").set("authorization", `Bearer ${token}`);
      expect(res.status).toBe(200);
      const now = new Date();
      expect(res.body).toEqual({
        tier: "basic",
        sizeGb: 50,
        pricePerPeriod: 200,
        currency: "USD",
        period: {
          start: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)).toISOString(),
          end: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)).toISOString(),
        },
        status: "unpaid",
      });
      contract.assertResponse("GET", "/api/v1/billing/storage", 200, res.body);
    });
  });

  describe("POST /api/v1/credits/topup", () => {
    it("when the amount is valid, then a Stripe Checkout Session is created on stripe-mock and nothing is credited", async () => {
      const res = await api()
        .post("/api/v1/credits/topup")
        .set("authorization", `Bearer ${token}`)
        .send({ amount: 2_000 });
      expect(res.status).toBe(200);
      expect(res.body.checkoutSessionId).toMatch(/^cs_/);
      expect(res.body.checkoutUrl).toMatch(/^https?:\/\//);
      contract.assertResponse("POST", "/api/v1/credits/topup", 200, res.body);
      const rows = await svc.database.db.select().from(topupsTable).where(eq(topupsTable.accountId, user));
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({
        amount: 2_000,
        status: "open",
        checkoutSessionId: res.body.checkoutSessionId,
      });
      const wallet = await svc.database.db
        .select()
        .from(walletsTable)
        .where(eq(walletsTable.accountId, user));
      expect(wallet[0]!.balance).toBe(0);
      // The deletion-grace check forwarded the caller's own token to accounts.
      expect(svc.accounts.requests.at(-1)).toEqual({
        authorization: `Bearer ${token}`,
        path: "/internal/v1/accounts/me",
      });
    });

    it("when the same Idempotency-Key is sent twice, then both answers name the same top-up", async () => {
      const send = () =>
        api()
          .post("/api/v1/credits/topup")
          .set("authorization", `Bearer ${token}`)
          .set("idempotency-key", "retry-1")
          .send({ amount: 1_500 });
      const [a, b] = await Promise.all([send(), send()]);
      expect(a.status).toBe(200);
      expect(b.body).toEqual(a.body);
      const rows = await svc.database.db
        .select()
        .from(topupsTable)
        .where(eq(topupsTable.clientKey, "retry-1"));
      expect(rows).toHaveLength(1);
    });

    it("when an Idempotency-Key is reused with another amount, then 400 names amount", async () => {
      const res = await api()
        .post("/api/v1/credits/topup")
        .set("authorization", `Bearer ${token}`)
        .set("idempotency-key", "retry-1")
        .send({ amount: 9_000 });
      expect(res.status).toBe(400);
      expect(res.body.error).toBe("VALIDATION_ERROR");
      expect(res.body.message).toContain("amount");
    });

    it.each([
      ["below the minimum", { amount: 499 }],
      ["above the maximum", { amount: 50_001 }],
      ["not an integer", { amount: 10.5 }],
      ["a string", { amount: "2000" }],
      ["missing", {}],
    ])("when the amount is %s, then 400 VALIDATION_ERROR naming amount", async (_label, body) => {
      const res = await api()
        .post("/api/v1/credits/topup")
        .set("authorization", `Bearer ${token}`)
        .send(body);
      expect(res.status).toBe(400);
      expect(res.body.error).toBe("VALIDATION_ERROR");
      expect(res.body.message).toContain("amount");
    });

    it("when the body has an unknown field, then 400 names that field", async () => {
      const res = await api()
        .post("/api/v1/credits/topup")
        .set("authorization", `Bearer ${token}`)
        .send({ amount: 1_000, coupon: "x" });
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: "VALIDATION_ERROR", message: "Unknown field: coupon" });
    });

    it("when the body is not JSON, then 400 VALIDATION_ERROR", async () => {
      const res = await api()
        .post("/api/v1/credits/topup")
        .set("authorization", `Bearer ${token}`)
        .set("content-type", "application/json")
        .send("{nope");
      expect(res.status).toBe(400);
      expect(res.body.error).toBe("VALIDATION_ERROR");
    });

    it("when the account is in its deletion grace, then 409 ACCOUNT_PENDING_DELETION and no top-up", async () => {
      const pendingUser = "user-pending";
      svc.accounts.pendingDeletion.add(pendingUser);
      const res = await api()
        .post("/api/v1/credits/topup")
        .set("authorization", `Bearer ${await svc.token(pendingUser)}`)
        .send({ amount: 1_000 });
      expect(res.status).toBe(409);
      expect(res.body.error).toBe("ACCOUNT_PENDING_DELETION");
      contract.assertResponse("POST", "/api/v1/credits/topup", 409, res.body);
      const rows = await svc.database.db
        .select()
        .from(topupsTable)
        .where(eq(topupsTable.accountId, pendingUser));
      expect(rows).toHaveLength(0);
    });

    it("when accounts fails or is too slow, then 503 UNAVAILABLE and no top-up", async () => {
      const slowUser = "user-accounts-down";
      svc.accounts.failWith = 500;
      try {
        const failed = await api()
          .post("/api/v1/credits/topup")
          .set("authorization", `Bearer ${await svc.token(slowUser)}`)
          .send({ amount: 1_000 });
        expect(failed.status).toBe(503);
        expect(failed.body.error).toBe("UNAVAILABLE");
      } finally {
        svc.accounts.failWith = undefined;
      }
      svc.accounts.delayMs = 1_500;
      try {
        const slow = await api()
          .post("/api/v1/credits/topup")
          .set("authorization", `Bearer ${await svc.token(slowUser)}`)
          .send({ amount: 1_000 });
        expect(slow.status).toBe(503);
      } finally {
        svc.accounts.delayMs = undefined;
      }
      const rows = await svc.database.db
        .select()
        .from(topupsTable)
        .where(eq(topupsTable.accountId, slowUser));
      expect(rows).toHaveLength(0);
    });

    it("when Stripe cannot be reached, then 503 UNAVAILABLE, and a retry with the same Idempotency-Key reuses the top-up", async () => {
      const down = await startBillingTestService({
        env: { STRIPE_API_BASE: "http://127.0.0.1:1", STRIPE_TIMEOUT_MS: "500" },
      });
      try {
        const send = async () =>
          request(down.url)
            .post("/api/v1/credits/topup")
            .set("authorization", `Bearer ${await down.token("user-stripe-down")}`)
            .set("idempotency-key", "k-down")
            .send({ amount: 1_000 });
        const res = await send();
        expect(res.status).toBe(503);
        expect(res.body.error).toBe("UNAVAILABLE");
        contract.assertResponse("POST", "/api/v1/credits/topup", 503, res.body);
        expect((await send()).status).toBe(503);
        const rows = await down.database.db.select().from(topupsTable);
        expect(rows).toHaveLength(1);
        expect(rows[0]!.status).toBe("creating");
      } finally {
        await down.close();
      }
    });

    it("when no token is sent, then 401", async () => {
      const res = await api().post("/api/v1/credits/topup").send({ amount: 1_000 });
      expect(res.status).toBe(401);
    });
  });

  describe("internal start authorizations", () => {
    const startUser = "user-start";
    let startToken: string;
    beforeAll(async () => {
      startToken = await svc.token(startUser);
      await creditWallet(svc.deps, startUser, 500);
    });
    const authorize = (body: object, bearer = startToken) =>
      api().post("/internal/v1/start-authorizations").set("authorization", `Bearer ${bearer}`).send(body);

    it("when the spendable balance covers 15 minutes, then a hold is placed and returned with the storage tier", async () => {
      // 500 credited - 200 storage = 300 = 15 min at 20.
      const res = await authorize({ sessionId: "s-ok", ratePerMinute: 20, currency: "USD" });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        authorizationId: expect.stringMatching(/^[0-9a-f-]{36}$/),
        holdAmount: 300,
        storage: { tier: "basic", sizeGb: 50 },
      });
      const wallet = (
        await svc.database.db.select().from(walletsTable).where(eq(walletsTable.accountId, startUser))
      )[0]!;
      expect(wallet).toMatchObject({ balance: 300, held: 300 });
      const again = await authorize({ sessionId: "s-ok", ratePerMinute: 20, currency: "USD" });
      expect(again.body.authorizationId).toBe(res.body.authorizationId);
    });

    it("when the rest is held, then a second start is refused with 402 INSUFFICIENT_CREDITS", async () => {
      const res = await authorize({ sessionId: "s-second", ratePerMinute: 1, currency: "USD" });
      expect(res.status).toBe(402);
      expect(res.body.error).toBe("INSUFFICIENT_CREDITS");
    });

    it("when the hold is released, then 204, idempotently, and the money is spendable again", async () => {
      const first = await authorize({ sessionId: "s-ok", ratePerMinute: 20, currency: "USD" });
      const release = () =>
        api()
          .post(`/internal/v1/start-authorizations/${first.body.authorizationId}/release`)
          .set("authorization", `Bearer ${startToken}`);
      expect((await release()).status).toBe(204);
      expect((await release()).status).toBe(204);
      const wallet = (
        await svc.database.db.select().from(walletsTable).where(eq(walletsTable.accountId, startUser))
      )[0]!;
      expect(wallet).toMatchObject({ balance: 300, held: 0 });
      const hold = (
        await svc.database.db.select().from(holdsTable).where(eq(holdsTable.sessionId, "s-ok"))
      )[0]!;
      expect(hold.status).toBe("released");
      expect((await authorize({ sessionId: "s-next", ratePerMinute: 20, currency: "USD" })).status).toBe(200);
    });

    it("when another account releases the hold, or the id is unknown, then 404", async () => {
      const held = await authorize({ sessionId: "s-next", ratePerMinute: 20, currency: "USD" });
      const other = await svc.token("someone-else");
      const res = await api()
        .post(`/internal/v1/start-authorizations/${held.body.authorizationId}/release`)
        .set("authorization", `Bearer ${other}`);
      expect(res.status).toBe(404);
      const unknown = await api()
        .post("/internal/v1/start-authorizations/not-a-uuid/release")
        .set("authorization", `Bearer ${startToken}`);
      expect(unknown.status).toBe(404);
    });

    it.each([
      ["a missing sessionId", { ratePerMinute: 10, currency: "USD" }, "sessionId"],
      ["a zero rate", { sessionId: "x", ratePerMinute: 0, currency: "USD" }, "ratePerMinute"],
      ["a lower-case currency", { sessionId: "x", ratePerMinute: 10, currency: "usd" }, "currency"],
      ["another currency", { sessionId: "x", ratePerMinute: 10, currency: "EUR" }, "currency"],
      ["an unknown field", { sessionId: "x", ratePerMinute: 10, currency: "USD", extra: 1 }, "extra"],
    ])("when the request has %s, then 400 naming the field", async (_label, body, field) => {
      const res = await authorize(body);
      expect(res.status).toBe(400);
      expect(res.body.error).toBe("VALIDATION_ERROR");
      expect(res.body.message).toContain(field);
    });

    it("when no token is sent, then 401", async () => {
      const res = await api().post("/internal/v1/start-authorizations").send({});
      expect(res.status).toBe(401);
    });
  });

  it("when a body breaks the contract, then the contract check fails (so the checks above can fail)", async () => {
    expect(() =>
      contract.assertResponse("GET", "/api/v1/credits/me", 200, { balance: -1, currency: "usd" }),
    ).toThrow();
  });

  it("when an unknown route is asked, then 404 NOT_FOUND", async () => {
    const res = await api().get("/api/v1/credits/nope").set("authorization", `Bearer ${token}`);
    expect(res.status).toBe(404);
    expect(res.body.error).toBe("NOT_FOUND");
  });

  it("when everything above has run, then every wallet's balance equals its ledger sum", async () => {
    expect(await findLedgerMismatches(svc.database.db)).toEqual([]);
  });
});
