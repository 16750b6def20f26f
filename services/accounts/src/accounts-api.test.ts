import path from "node:path";
import pino from "pino";
import request from "supertest";
import { loadConfig } from "@cgs/shared";
import { createContractChecker } from "@cgs/shared/testing/contract";
import { openTestDatabase, type OpenedTestDatabase } from "@cgs/shared/testing/db";
import {
  startTestIdentityProvider,
  testVerifier,
  type TestIdentityProvider,
} from "@cgs/shared/testing/tokens";
import { buildAccounts } from "./composition";
import { accountsConfigSchema } from "./config";
import * as schema from "./data/schema";
import { DEFAULT_PREFERENCES } from "./domain/preferences";

const contract = createContractChecker();
const migrationsFolder = path.join(__dirname, "..", "drizzle");

let idp: TestIdentityProvider;
let database: OpenedTestDatabase<typeof schema>;
let app: ReturnType<typeof buildAccounts>["app"];
const clock = { current: new Date("2026-03-01T10:00:00.000Z"), now: () => new Date(clock.current) };

beforeAll(async () => {
  idp = await startTestIdentityProvider();
  database = await openTestDatabase("pglite", "accounts_api", { schema, migrationsFolder });
  const config = loadConfig(accountsConfigSchema, { LOG_LEVEL: "silent" });
  app = buildAccounts(
    {
      config,
      logger: pino({ level: "silent" }),
      database,
      verifier: testVerifier(idp),
    },
    { clock },
  ).app;
});

afterAll(async () => {
  await database.destroy();
  await idp.close();
});

let userSeq = 0;
async function bearer(claims: Record<string, unknown> = {}) {
  userSeq += 1;
  const sub = `user-${userSeq}-${Date.now()}`;
  return { sub, header: `Bearer ${await idp.sign({ sub, email: `${sub}@example.com`, ...claims })}` };
}

describe("settings", () => {
  it("when an account never saved preferences, then GET answers the documented defaults and creates the account", async () => {
    const { sub, header } = await bearer();
    const res = await request(app).get("/api/v1/settings").set("Authorization", header);
    expect(res.status).toBe(200);
    expect(res.body).toEqual(DEFAULT_PREFERENCES);
    contract.assertResponse("GET", "/api/v1/settings", 200, res.body);
    const rows = await database.db.select().from(schema.accountsTable);
    expect(rows.some((r) => r.identityUserId === sub && r.email === `${sub}@example.com`)).toBe(true);
  });

  it("when PATCH sends a merge patch, then only those fields change and later reads keep them", async () => {
    const { header } = await bearer();
    const first = await request(app)
      .patch("/api/v1/settings")
      .set("Authorization", header)
      .set("Content-Type", "application/merge-patch+json")
      .send(JSON.stringify({ fps: 120, codec: "av1" }));
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ ...DEFAULT_PREFERENCES, fps: 120, codec: "av1" });
    contract.assertResponse("PATCH", "/api/v1/settings", 200, first.body);

    const second = await request(app)
      .patch("/api/v1/settings")
      .set("Authorization", header)
      .send({ resolution: "3840x2160", idleTimeoutMinutes: 30 });
    expect(second.body).toEqual({
      ...DEFAULT_PREFERENCES,
      fps: 120,
      codec: "av1",
      resolution: "3840x2160",
      idleTimeoutMinutes: 30,
    });
    const read = await request(app).get("/api/v1/settings").set("Authorization", header);
    expect(read.body).toEqual(second.body);

    const empty = await request(app).patch("/api/v1/settings").set("Authorization", header).send({});
    expect(empty.status).toBe(200);
    expect(empty.body).toEqual(second.body);
  });

  it("when an account saved the removed lowBalanceEmail preference, then reads no longer show it", async () => {
    const { sub, header } = await bearer();
    await database.db
      .insert(schema.accountsTable)
      .values({ identityUserId: sub, preferences: { fps: 30, lowBalanceEmail: false } as never });
    const res = await request(app).get("/api/v1/settings").set("Authorization", header);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ...DEFAULT_PREFERENCES, fps: 30 });
    contract.assertResponse("GET", "/api/v1/settings", 200, res.body);
  });

  const badInputs: [string, unknown, string][] = [
    ["fps outside the allowed values", { fps: 45 }, "fps"],
    ["fps as a string", { fps: "60" }, "fps"],
    ["an unknown resolution", { resolution: "800x600" }, "resolution"],
    ["a bitrate below the minimum", { bitrateKbps: 1999 }, "bitrateKbps"],
    ["a fractional bitrate", { bitrateKbps: 2500.5 }, "bitrateKbps"],
    ["an unknown codec", { codec: "vp9" }, "codec"],
    ["a malformed region", { region: "Mars" }, "region"],
    ["an idle timeout above the maximum", { idleTimeoutMinutes: 241 }, "idleTimeoutMinutes"],
    ["the removed low-balance e-mail flag", { lowBalanceEmail: false }, "lowBalanceEmail"],
    ["null (merge-patch unset)", { codec: null }, "codec"],
    ["an unknown field", { theme: "dark" }, "theme"],
    ["a valid field next to an invalid one", { codec: "av1", fps: 0 }, "fps"],
    ["an array instead of an object", [1, 2], "body"],
  ];

  it.each(badInputs)(
    "when PATCH sends %s, then 400 VALIDATION_ERROR names the field and nothing is saved",
    async (_name, body, field) => {
      const { header } = await bearer();
      const res = await request(app)
        .patch("/api/v1/settings")
        .set("Authorization", header)
        .send(body as object);
      expect(res.status).toBe(400);
      expect(res.body.error).toBe("VALIDATION_ERROR");
      expect(res.body.message).toContain(field);
      contract.assertResponse("PATCH", "/api/v1/settings", 400, res.body);
      const read = await request(app).get("/api/v1/settings").set("Authorization", header);
      expect(read.body).toEqual(DEFAULT_PREFERENCES);
    },
  );

  it("when the request has no valid token, then 401 UNAUTHENTICATED with the exact message", async () => {
    for (const auth of [undefined, "Bearer nope", `Bearer ${await idp.signWithUnpublishedKey()}`]) {
      const req = request(app).get("/api/v1/settings");
      const res = await (auth ? req.set("Authorization", auth) : req);
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ error: "UNAUTHENTICATED", message: "Missing or invalid bearer token" });
    }
  });
});

describe("identity", () => {
  it("when GET /api/v1/session, then it answers the token's identity, expiry and how it authenticated", async () => {
    const exp = Math.floor(Date.now() / 1000) + 1234;
    const { sub, header } = await bearer({ exp });
    const res = await request(app).get("/api/v1/session").set("Authorization", header);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      identityUserId: sub,
      email: `${sub}@example.com`,
      expiresAt: new Date(exp * 1000).toISOString(),
      authMethod: "bearer",
      deletion: null,
    });
    contract.assertResponse("GET", "/api/v1/session", 200, res.body);

    const viaCookie = await request(app)
      .get("/api/v1/session")
      .set("Authorization", header)
      .set("X-Cgs-Auth-Method", "cookie");
    expect(viaCookie.body.authMethod).toBe("cookie");
  });

  it("when the token carries no e-mail, then email is null", async () => {
    const { header } = await bearer({ email: undefined });
    const res = await request(app).get("/api/v1/session").set("Authorization", header);
    expect(res.body.email).toBeNull();
    contract.assertResponse("GET", "/api/v1/session", 200, res.body);
  });
});

describe("account deletion", () => {
  it("when deletion is requested twice, then both answer 202 with the original times 30 days apart", async () => {
    const { header } = await bearer();
    const first = await request(app).delete("/api/v1/account/delete").set("Authorization", header);
    expect(first.status).toBe(202);
    expect(first.body).toEqual({
      status: "pending_deletion",
      requestedAt: "2026-03-01T10:00:00.000Z",
      purgeAt: "2026-03-31T10:00:00.000Z",
    });
    contract.assertResponse("DELETE", "/api/v1/account/delete", 202, first.body);

    clock.current = new Date("2026-03-02T00:00:00.000Z");
    const again = await request(app).delete("/api/v1/account/delete").set("Authorization", header);
    expect(again.status).toBe(202);
    expect(again.body).toEqual(first.body);

    const identity = await request(app).get("/api/v1/session").set("Authorization", header);
    expect(identity.body.deletion).toEqual({
      requestedAt: "2026-03-01T10:00:00.000Z",
      purgeAt: "2026-03-31T10:00:00.000Z",
    });
    contract.assertResponse("GET", "/api/v1/session", 200, identity.body);
    clock.current = new Date("2026-03-01T10:00:00.000Z");
  });
});

describe("internal account view", () => {
  it("when sessions or billing call /internal/v1/accounts/me, then they read the deletion state and preferences", async () => {
    const { sub, header } = await bearer();
    const fresh = await request(app).get("/internal/v1/accounts/me").set("Authorization", header);
    expect(fresh.status).toBe(200);
    expect(fresh.body).toEqual({
      identityUserId: sub,
      pendingDeletion: false,
      purgeAt: null,
      preferences: DEFAULT_PREFERENCES,
    });

    await request(app).patch("/api/v1/settings").set("Authorization", header).send({ region: "eu-west-1" });
    await request(app).delete("/api/v1/account/delete").set("Authorization", header);
    const pending = await request(app).get("/internal/v1/accounts/me").set("Authorization", header);
    expect(pending.body).toEqual({
      identityUserId: sub,
      pendingDeletion: true,
      purgeAt: "2026-03-31T10:00:00.000Z",
      preferences: { ...DEFAULT_PREFERENCES, region: "eu-west-1" },
    });
  });

  it("when the internal route is called without a valid token, then 401", async () => {
    const res = await request(app).get("/internal/v1/accounts/me");
    expect(res.status).toBe(401);
    expect(res.body.error).toBe("UNAUTHENTICATED");
  });
});
