import { randomUUID } from "node:crypto";
import { openTestDatabase, type OpenedTestDatabase } from "@cgs/shared/testing/db";
import { pendingStops } from "../domain/play-state";
import type { PlaySettings } from "../domain/session-deps";
import { migrationsFolder } from "../testing/sessions-harness";
import * as schema from "./schema";
import { findSessionsNeedingAttention } from "./session-repository";
import { sessionsTable, type SessionRow } from "./session-tables";

// The idle clock is written twice by design: in SQL (the play sweep's candidates, so it reads only the sessions a
// warning may be near for) and in TypeScript (play-state's idleBase, which decides). This keeps the two in step.
let database: OpenedTestDatabase<typeof schema>;
beforeAll(async () => {
  database = await openTestDatabase("pglite", "sessions", { schema, migrationsFolder });
});
afterAll(async () => {
  await database.destroy();
});

const minuteMs = 60_000;
const play: PlaySettings = {
  minuteMs,
  idleWarningMinutes: 5,
  maxLengthWarningMinutes: 10,
  extensionMinutes: 60,
  hostStaleMs: 90_000,
  hostLostMs: 300_000,
};

/** A seeded generator, so a failure names a case that can be replayed. */
function random(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s * 1_103_515_245 + 12_345) % 2_147_483_648;
    return s / 2_147_483_648;
  };
}

describe("the play sweep's candidates", () => {
  it("when 400 running sessions with every mix of play, input, absent devices and Keep playing are asked about, then SQL picks exactly those whose idle warning TypeScript says has begun", async () => {
    const now = new Date("2026-11-25T12:00:00Z");
    const rand = random(34);
    const ago = (maxMinutes: number) => new Date(now.getTime() - Math.floor(rand() * maxMinutes * minuteMs));
    const maybe = (p: number, value: () => Date) => (rand() < p ? value() : null);
    const rows = Array.from({ length: 400 }, () => {
      const runningAt = ago(60);
      const within = (d: Date | null) => (d && d < runningAt ? runningAt : d);
      return {
        id: randomUUID(),
        accountId: `acct-${randomUUID()}`,
        state: "running" as const,
        region: "us-east-1",
        ratePerMinute: 10,
        currency: "USD",
        // Nothing else may bring a session into the sweep: no host, length or credit window is near.
        ready: false,
        maxLengthMinutes: 1_440,
        idleTimeoutMinutes: 5 + Math.floor(rand() * 40),
        createdAt: runningAt,
        runningAt,
        playSeenAt: within(maybe(0.8, () => ago(60))),
        inputSeenAt: within(maybe(0.6, () => ago(60))),
        deviceAbsentSince: within(maybe(0.4, () => ago(30))),
        keptAliveAt: within(maybe(0.2, () => ago(60))),
      };
    });
    await database.db.insert(sessionsTable).values(rows);

    const picked = await findSessionsNeedingAttention(
      database.db,
      {
        now,
        minuteMs,
        idleLeadMs: play.idleWarningMinutes * minuteMs,
        lengthLeadMs: play.maxLengthWarningMinutes * minuteMs,
        hostStaleMs: play.hostStaleMs,
      },
      1_000,
    );
    const stored = await database.db.select().from(sessionsTable);
    const warned = (row: SessionRow) =>
      pendingStops(row, play).some((stop) => stop.kind === "idle" && stop.warnFrom <= now);
    const expected = stored.filter(warned).map((r) => r.id);
    expect(expected.length).toBeGreaterThan(50);
    expect(expected.length).toBeLessThan(350);
    expect(picked.map((r) => r.id).sort()).toEqual(expected.sort());
  });
});
