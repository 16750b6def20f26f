import { metrics } from "@cgs/shared";
import {
  admissionTimes,
  leaveQueueToStart,
  queueHead,
  queuedSince,
  returnToQueue,
  sessionsAhead,
} from "../data/queue-repository";
import { updateSessionIf } from "../data/session-repository";
import type { SessionRow } from "../data/session-tables";
import { inRegion } from "./regions";
import { publishSessionFailed } from "./session-events";
import type { SessionsDomainDeps } from "./session-deps";
import { statusView, toSessionStatus, type SessionStatus } from "./session-status";
import { provision, settleStoppedDuringLaunch } from "./start-session";

/** A queued session's place (openapi.json `QueuePlace`). */
export interface QueuePlace {
  position: number;
  estimatedWaitSeconds: number;
  regions: string[];
  queuedAt: string;
}

/** What a queued session's row says until its first poll: where it waits. */
export function queueMessage(regions: readonly string[], deps: Pick<SessionsDomainDeps, "regions">): string {
  return `Every machine in ${regionNames(regions, deps)} is taken: waiting in line for the next one`;
}

function regionNames(regions: readonly string[], deps: Pick<SessionsDomainDeps, "regions">): string {
  const names = regions.map((id) => deps.regions.get(id)?.name ?? id);
  return names.length <= 1 ? (names[0] ?? "") : `${names.slice(0, -1).join(", ")} or ${names.at(-1)}`;
}

const HOUR_MS = 3_600_000;

/**
 * The typical time between two machines freed in a region for the line: the median gap between the last hour's
 * admissions there, or the configured typical interval until three were measured.
 */
async function freeInterval(deps: SessionsDomainDeps, region: string): Promise<number> {
  const times = await admissionTimes(deps.db, region, new Date(deps.clock.now().getTime() - HOUR_MS));
  if (times.length < 3) return deps.settings.queue.typicalIntervalMs;
  const gaps = times.slice(1).map((t, i) => t.getTime() - times[i]!.getTime());
  gaps.sort((a, b) => a - b);
  return Math.max(1_000, gaps[Math.floor(gaps.length / 2)]!);
}

/** A queued session's best place over the regions it waits for, and the wait that place means. */
export async function queuePlace(deps: SessionsDomainDeps, row: SessionRow): Promise<QueuePlace | null> {
  if (row.state !== "queued" || !row.queuedAt) return null;
  const regions = row.queueRegions ?? [row.region];
  let best: { position: number; waitMs: number } | undefined;
  for (const region of regions) {
    const position = (await sessionsAhead(deps.db, row, region)) + 1;
    const waitMs = position * (await freeInterval(deps, region));
    if (!best || waitMs < best.waitMs) best = { position, waitMs };
  }
  return {
    position: best!.position,
    estimatedWaitSeconds: Math.round(best!.waitMs / 1000),
    regions,
    queuedAt: row.queuedAt.toISOString(),
  };
}

const ordinal = (n: number) => {
  const tens = n % 100;
  const suffix =
    tens >= 11 && tens <= 13 ? "th" : n % 10 === 1 ? "st" : n % 10 === 2 ? "nd" : n % 10 === 3 ? "rd" : "th";
  return `${n}${suffix}`;
};

/** The poll resource of a queued session: its place in line and what that means in words. */
export async function queuedStatus(deps: SessionsDomainDeps, row: SessionRow): Promise<SessionStatus> {
  const place = await queuePlace(deps, row);
  return toSessionStatus(row, statusView(deps), place && { place, message: placeMessage(place, deps) });
}

/** Poll's message while queued: "Waiting for a machine in Europe (Ireland): 3rd in line, about 4 min". */
export function placeMessage(place: QueuePlace, deps: Pick<SessionsDomainDeps, "regions">): string {
  const minutes = Math.max(1, Math.round(place.estimatedWaitSeconds / 60));
  return `Waiting for a machine in ${regionNames(place.regions, deps)}: ${ordinal(place.position)} in line, about ${minutes} min`;
}

export interface QueuePassReport {
  admitted: number;
  expired: number;
}

/**
 * One pass of the line: sessions past the longest wait fail (nothing was charged), then each region gives freed
 * capacity to its first in line until a launch finds it full. A region's pass runs in one replica at a time (the
 * caller leases it), so its line is served in order.
 */
export async function serveQueue(
  deps: SessionsDomainDeps,
  regions: readonly string[],
): Promise<QueuePassReport> {
  const report: QueuePassReport = { admitted: 0, expired: 0 };
  const { db, clock, settings, logger } = deps;
  const cutoff = new Date(clock.now().getTime() - settings.queue.maxWaitMs);
  for (const row of await queuedSince(db, cutoff, 100)) {
    if (await expire(deps, row)) report.expired += 1;
  }
  for (const region of regions) {
    for (;;) {
      const head = await queueHead(db, region);
      if (!head) break;
      const taken = await leaveQueueToStart(db, head.id, region, clock.now());
      if (!taken) continue; // it left the line, or another region's pass took it
      const here = inRegion(deps, region);
      let outcome: Awaited<ReturnType<typeof provision>>;
      try {
        outcome = await provision(here, taken, {
          authorizationId: null,
          storageGb: taken.queueStorageGb ?? 0,
        });
      } catch (err) {
        logger.error({ err, sessionId: taken.id, region }, "a queued session's start failed");
        await failQueued(
          deps,
          taken,
          "The start did not complete; nothing was charged. Start again to retry",
        );
        continue;
      }
      if (outcome.kind === "full") {
        await returnToQueue(db, taken, queueMessage(taken.queueRegions ?? [region], deps));
        break;
      }
      if (outcome.kind === "stopped") {
        await settleStoppedDuringLaunch(here, taken, outcome.instanceId, undefined, null);
        continue;
      }
      report.admitted += 1;
      metrics.queueAdmissions.inc();
      metrics.queueWait.observe((clock.now().getTime() - taken.queuedAt!.getTime()) / 1000);
      logger.info({ sessionId: taken.id, region }, "a machine freed: the first in line starts");
    }
  }
  return report;
}

async function expire(deps: SessionsDomainDeps, row: SessionRow): Promise<boolean> {
  const minutes = Math.round(deps.settings.queue.maxWaitMs / 60_000);
  return failQueued(
    deps,
    row,
    `No machine freed within ${minutes} min in ${regionNames(row.queueRegions ?? [row.region], deps)}; nothing was charged. Start again to wait again`,
    "queued",
  );
}

/** Ends a session that never got a machine: failed, with why; session.failed (never ran) tells billing. */
async function failQueued(
  deps: SessionsDomainDeps,
  row: SessionRow,
  message: string,
  from: "queued" | "starting" = "starting",
): Promise<boolean> {
  return deps.db.transaction(async (tx) => {
    const ended = await updateSessionIf(tx, row.id, from, {
      state: "failed",
      message,
      stopReason: "start_failed",
      endedAt: deps.clock.now(),
    });
    if (!ended) return false;
    await publishSessionFailed(deps, tx, { ...ended, runningAt: null }, "start_failed");
    return true;
  });
}
