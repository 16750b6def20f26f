import path from "node:path";
import pino from "pino";
import request from "supertest";
import { eq } from "drizzle-orm";
import {
  createKeycloakAdmin,
  createOutboxPublisher,
  keycloakAdminOptions,
  loadConfig,
  outboxTable,
  type Closer,
  type IdentityAdmin,
} from "@cgs/shared";
import { openTestDatabase, type OpenedTestDatabase } from "@cgs/shared/testing/db";
import { createTestSqsClient, drainQueue, uniqueQueueName, waitUntil } from "@cgs/shared/testing/queue";
import { createTestUser, getTestUser, uniqueEmail, type TestUser } from "@cgs/shared/testing/keycloak";
import {
  startTestIdentityProvider,
  testVerifier,
  type TestIdentityProvider,
} from "@cgs/shared/testing/tokens";
import { GetQueueUrlCommand } from "@aws-sdk/client-sqs";
import { accountsConfigSchema, type AccountsConfig } from "./config";
import { AccountRepository } from "./data/account-repository";
import * as schema from "./data/schema";
import { DAY_MS } from "@cgs/shared";
import { buildAccounts } from "./composition";
import { createDeletionSweep } from "./domain/deletion-sweep";

process.env.AWS_ACCESS_KEY_ID ||= "test";
process.env.AWS_SECRET_ACCESS_KEY ||= "test";

const migrationsFolder = path.join(__dirname, "..", "drizzle");
const logger = pino({ level: "silent" });
const T0 = new Date("2026-05-01T12:00:00.000Z");

let idp: TestIdentityProvider;
let database: OpenedTestDatabase<typeof schema>;
let config: AccountsConfig;
let prefix: string;
const clock = { current: new Date(T0), now: () => new Date(clock.current) };
const keycloak: IdentityAdmin = createKeycloakAdmin(
  keycloakAdminOptions(
    loadConfig(accountsConfigSchema, {
      OIDC_ISSUER: `${process.env.KEYCLOAK_URL || "http://127.0.0.1:8081"}/realms/cgs`,
    }),
  ),
);

beforeAll(async () => {
  idp = await startTestIdentityProvider();
  database = await openTestDatabase("postgres", "accounts_sweep", { schema, migrationsFolder });
  prefix = `${uniqueQueueName("acct")}-`;
  config = loadConfig(accountsConfigSchema, {
    LOG_LEVEL: "silent",
    AWS_ENDPOINT_URL: process.env.AWS_ENDPOINT_URL || "http://127.0.0.1:5000",
    QUEUE_NAME_PREFIX: prefix,
    CREATE_QUEUES: "true",
    QUEUE_WAIT_SECONDS: "1",
    OUTBOX_RELAY_INTERVAL_MS: "50",
    DELETION_SWEEP_INTERVAL_MS: "50",
  });
});

afterAll(async () => {
  await database?.destroy();
  await idp?.close();
});

/** The service as main.ts composes it, over the test clock and the real identity provider. */
function accountsFor() {
  return buildAccounts(
    {
      config,
      logger,
      database,
      verifier: testVerifier(idp),
    },
    { clock, identity: keycloak },
  );
}

function appFor() {
  return accountsFor().app;
}

async function scheduleDeletion(app: ReturnType<typeof appFor>, token: string) {
  const res = await request(app).delete("/api/v1/account/delete").set("Authorization", `Bearer ${token}`);
  expect(res.status).toBe(202);
  return res.body as { requestedAt: string; purgeAt: string };
}

describe("deletion sweep", () => {
  let user: TestUser | undefined;
  afterEach(async () => {
    await user?.remove();
    user = undefined;
    clock.current = new Date(T0);
  });

  it("when the grace ends, then the account is purged once, account.purge reaches sessions and billing, and the identity is disabled", async () => {
    user = await createTestUser(uniqueEmail("purge"), { password: "Initial-password-1" });
    const app = appFor();
    const doomed = await idp.sign({ sub: user.id, email: user.email });
    const keeper = await idp.sign({ sub: `keeper-${Date.now()}` });
    const schedule = await scheduleDeletion(app, doomed);
    await request(app).get("/api/v1/settings").set("Authorization", `Bearer ${keeper}`).expect(200);

    const closers: Closer[] = await accountsFor().startWorkers();
    const sqs = createTestSqsClient();
    try {
      // One day before the end of the grace nothing happens.
      clock.current = new Date(new Date(schedule.purgeAt).getTime() - DAY_MS);
      await new Promise((r) => setTimeout(r, 300));
      expect(await new AccountRepository(database.db).find(user.id)).toBeDefined();

      clock.current = new Date(new Date(schedule.purgeAt).getTime() + 1_000);
      const repo = new AccountRepository(database.db);
      // The sweep disables the user in Keycloak and then records it in the same transaction's commit: wait for both.
      await waitUntil(
        async () =>
          (await getTestUser(user!.id))?.enabled === false &&
          (await repo.findPurged(user!.id))?.identityDisabledAt instanceof Date,
        { timeoutMs: 10_000, description: "identity disabled and recorded" },
      );
      expect(await repo.find(user.id)).toBeUndefined();
      expect(await repo.findPurged(user.id)).toMatchObject({ identityDisabledAt: expect.any(Date) });
      expect(
        await repo.find(JSON.parse(Buffer.from(keeper.split(".")[1]!, "base64url").toString()).sub),
      ).toBeDefined();

      for (const service of ["cgs-sessions", "cgs-billing"]) {
        const { QueueUrl } = await sqs.send(new GetQueueUrlCommand({ QueueName: prefix + service }));
        const messages = await waitUntil(
          async () => {
            const got = await drainQueue(sqs, QueueUrl!, { waitTimeSeconds: 1 });
            return got.length > 0 ? got : null;
          },
          { timeoutMs: 10_000, description: `account.purge on ${service}` },
        );
        expect(messages).toHaveLength(1);
        const event = JSON.parse(messages[0]!.Body!);
        expect(event).toMatchObject({
          type: "account.purge",
          accountId: user.id,
          data: { identityUserId: user.id, requestedAt: schedule.requestedAt },
        });
      }

      // The purged user's still-valid token cannot bring the account back.
      const revived = await request(app).get("/api/v1/settings").set("Authorization", `Bearer ${doomed}`);
      expect(revived.status).toBe(401);
      expect(await repo.find(user.id)).toBeUndefined();
    } finally {
      for (const close of closers) await close();
      sqs.destroy();
    }
  });

  it("when several replicas sweep at once, then each due account is purged and published exactly once", async () => {
    const app = appFor();
    const subs = Array.from({ length: 12 }, (_, i) => `race-${i}-${Date.now()}`);
    for (const sub of subs) await scheduleDeletion(app, await idp.sign({ sub }));
    clock.current = new Date(T0.getTime() + 31 * DAY_MS);
    const disabled: string[] = [];
    const identity: IdentityAdmin = {
      findUserByEmail: async () => null,
      passwordSetAt: async () => null,
      setPassword: async () => undefined,
      clearLoginFailures: async () => undefined,
      disableUser: async (id) => {
        disabled.push(id);
      },
    };
    const sweeps = Array.from({ length: 3 }, () =>
      createDeletionSweep({
        database,
        accounts: new AccountRepository(database.db),
        identity,
        clock,
        logger,
        batchSize: 2,
        events: createOutboxPublisher("race-"),
      }),
    );
    const results = await Promise.all(sweeps.map((s) => s.runOnce()));
    const purged = results.flatMap((r) => r.purged);
    expect([...purged].sort()).toEqual([...subs].sort());
    // Each pass disables at most a batch of identities; later passes finish the rest, each exactly once.
    for (let pass = 0; pass < 10 && disabled.length < subs.length; pass += 1) {
      await Promise.all(sweeps.map((s) => s.runOnce()));
    }
    expect([...disabled].sort()).toEqual([...subs].sort());
    const rows = await database.db
      .select()
      .from(outboxTable)
      .where(eq(outboxTable.eventType, "account.purge"));
    const mine = rows.filter((r) => subs.includes(r.payload.accountId));
    expect(mine).toHaveLength(subs.length * 2);
    expect(new Set(mine.map((r) => `${r.payload.accountId} ${r.destination}`)).size).toBe(subs.length * 2);
    expect(new Set(mine.map((r) => r.destination))).toEqual(
      new Set(["race-cgs-sessions", "race-cgs-billing"]),
    );
  });

  it("when disabling the identity fails, then the purge stands and the disable is retried after a backoff", async () => {
    const app = appFor();
    const sub = `flaky-${Date.now()}`;
    await scheduleDeletion(app, await idp.sign({ sub }));
    clock.current = new Date(T0.getTime() + 30 * DAY_MS + 1);
    let failures = 1;
    const attempts: string[] = [];
    const identity: IdentityAdmin = {
      findUserByEmail: async () => null,
      passwordSetAt: async () => null,
      setPassword: async () => undefined,
      clearLoginFailures: async () => undefined,
      disableUser: async (id) => {
        attempts.push(id);
        if (failures-- > 0) throw new Error("identity provider down");
      },
    };
    const sweep = createDeletionSweep({
      database,
      accounts: new AccountRepository(database.db),
      identity,
      clock,
      logger,
      batchSize: 10,
      events: createOutboxPublisher("flaky-"),
    });
    const first = await sweep.runOnce();
    expect(first.purged).toContain(sub);
    expect(first.identityFailures).toBe(1);
    const repo = new AccountRepository(database.db);
    expect(await repo.findPurged(sub)).toMatchObject({ identityDisabledAt: null, disableAttempts: 1 });

    const tooSoon = await sweep.runOnce();
    expect(tooSoon.identitiesDisabled).not.toContain(sub);

    clock.current = new Date(clock.current.getTime() + 60_000);
    const retried = await sweep.runOnce();
    expect(retried.identitiesDisabled).toContain(sub);
    expect(attempts.filter((a) => a === sub)).toHaveLength(2);
  });
});
