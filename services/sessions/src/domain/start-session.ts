import { randomUUID } from "node:crypto";
import { AppError, metrics } from "@cgs/shared";
import type { StartAuthorization } from "../adapters/billing-client";
import { CloudCapacityError } from "../adapters/cloud-provider";
import {
  claimIdempotencyKey,
  deleteSession,
  findActiveSession,
  findVolume,
  forgetIdempotencyKey,
  insertStartingSession,
  saveIdempotentResponse,
  saveVolume,
  updateSessionIf,
} from "../data/session-repository";
import type { SessionRow, VolumeRow } from "../data/session-tables";
import { claimPoolInstance, releaseClaim } from "../data/pool-repository";
import { clearRegionFull, joinQueue, markRegionFull, queueLengths } from "../data/queue-repository";
import { inRegion, regionsToTry, type RegionChoice } from "./regions";
import { publishSessionFailed } from "./session-events";
import type { SessionsDomainDeps } from "./session-deps";
import { queueMessage, queuedStatus } from "./queue";
import { statusView, toSessionStatus, withCurrentFields, type SessionStatus } from "./session-status";

export interface StartInput extends RegionChoice {
  accountId: string;
  accessToken: string;
  /** Wait in line when every allowed region is full, rather than answer CLOUD_CAPACITY. */
  queue?: boolean;
  idempotencyKey?: string;
}

const IDEMPOTENT_WAIT_MS = 10_000;

const alreadyRunning = () =>
  new AppError("SESSION_ALREADY_RUNNING", "A session is already active; stop it before starting another");

/**
 * Start, made safe to retry: with an Idempotency-Key the first successful answer is stored and replayed.
 * A failed start forgets the key, so retrying after (say) a capacity error really tries again.
 */
export async function startSession(deps: SessionsDomainDeps, input: StartInput): Promise<SessionStatus> {
  const key = input.idempotencyKey;
  if (!key) return startOnce(deps, input);
  const { db, settings, clock } = deps;
  const deadline = clock.now().getTime() + IDEMPOTENT_WAIT_MS;
  for (;;) {
    const claim = await claimIdempotencyKey(db, input.accountId, key, settings.idempotencyTtlHours);
    if (claim.claimed) break;
    if (claim.response !== null) return withCurrentFields(claim.response as Partial<SessionStatus>);
    // The first request with this key is still running: wait for its answer rather than start twice.
    if (clock.now().getTime() > deadline) throw alreadyRunning();
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  try {
    const status = await startOnce(deps, input);
    await saveIdempotentResponse(db, input.accountId, key, status);
    return status;
  } catch (err) {
    await forgetIdempotencyKey(db, input.accountId, key);
    throw err;
  }
}

async function startOnce(deps: SessionsDomainDeps, input: StartInput): Promise<SessionStatus> {
  const { db, settings, accounts, billing, logger, clock } = deps;
  if (await findActiveSession(db, input.accountId)) throw alreadyRunning();

  const account = await accounts.getStatus(input.accessToken);
  if (account.pendingDeletion) {
    throw new AppError(
      "ACCOUNT_PENDING_DELETION",
      "The account is scheduled for deletion; cancel the deletion to start sessions",
    );
  }
  const allowed = regionsToTry(deps.regions, input, account.preferences.region, settings.autoMaxRttMs);

  // The row is the claim: the partial unique index lets exactly one of many concurrent starts insert it.
  const session = await insertStartingSession(db, {
    id: randomUUID(),
    accountId: input.accountId,
    state: "starting",
    region: allowed[0]!,
    ratePerMinute: settings.ratePerMinute,
    currency: settings.currency,
    idleTimeoutMinutes: account.preferences.idleTimeoutMinutes ?? settings.defaultIdleTimeoutMinutes,
    maxLengthMinutes: account.preferences.maxSessionLengthMinutes ?? settings.defaultMaxLengthMinutes,
    // The use cases' clock, which the start timeout, start-to-ready and poll's estimate measure against.
    createdAt: clock.now(),
  });
  if (!session) throw alreadyRunning();

  let authorization: StartAuthorization;
  try {
    const result = await billing.authorizeStart(input.accessToken, {
      sessionId: session.id,
      ratePerMinute: session.ratePerMinute,
      currency: session.currency,
    });
    if (!result.authorized) throw new AppError("INSUFFICIENT_CREDITS", result.message);
    authorization = result.authorization;
  } catch (err) {
    // A refusal placed no hold; a lost answer may have placed one, which billing gives back on session.failed.
    if (err instanceof AppError && err.status < 500) await deleteSession(db, session.id);
    else await abandonStart(deps, session);
    throw err;
  }
  const releaseHold = () =>
    billing.releaseAuthorization(input.accessToken, authorization.authorizationId).catch((err: unknown) => {
      // Billing also releases holds of sessions it never sees start; this is the fast path.
      logger.warn({ err, sessionId: session.id }, "could not release the start hold");
    });

  // Nobody jumps the line: a region with players waiting counts as full for a new start.
  const waiting = await queueLengths(db);
  const full: string[] = [];
  for (const region of allowed) {
    if ((waiting.get(region) ?? 0) > 0) {
      full.push(region);
      continue;
    }
    let outcome: Provisioned;
    try {
      outcome = await provision(inRegion(deps, region), session, authorization);
    } catch (err) {
      await abandonStart(deps, session);
      await releaseHold();
      if (err instanceof AppError) throw err;
      logger.error({ err, sessionId: session.id, region }, "instance launch failed");
      throw AppError.unavailable("The cloud provider could not launch an instance, try again shortly");
    }
    if (outcome.kind === "full") {
      full.push(region);
      continue;
    }
    if (outcome.kind === "stopped") {
      return settleStoppedDuringLaunch(
        inRegion(deps, region),
        session,
        outcome.instanceId,
        input.accessToken,
        authorization.authorizationId,
      );
    }
    return toSessionStatus(outcome.row, statusView(deps));
  }

  // Every allowed region is full.
  if (input.queue) {
    // Waiting holds no money: the balance and limits were checked above; metering starts when a machine runs.
    const row = await joinQueue(
      db,
      session.id,
      allowed,
      authorization.storage.sizeGb,
      clock.now(),
      queueMessage(allowed, deps),
    );
    await releaseHold();
    if (row) {
      metrics.queueJoins.inc();
      logger.info({ sessionId: session.id, regions: allowed }, "every allowed region is full: queued");
      return queuedStatus(deps, row);
    }
  } else {
    await abandonStart(deps, session);
    await releaseHold();
  }
  throw new AppError(
    "CLOUD_CAPACITY",
    `No capacity in ${full.join(", ")} now; try again shortly, or start with queue: true to wait in line`,
    503,
    { "Retry-After": String(settings.capacityRetryAfterSeconds) },
  );
}

type Provisioned =
  | { kind: "started"; row: SessionRow }
  | { kind: "full" }
  /** Stopped (user, credits, purge) while its instance was being launched. */
  | { kind: "stopped"; instanceId: string };

/**
 * Gives a starting session a machine in the region `deps` is for (see inRegion): its volume there, then the fastest
 * instance. A full region is remembered as full (GET /regions) and answered `full`, leaving the row starting for
 * the next region or the line; any other failure throws.
 */
export async function provision(
  deps: SessionsDomainDeps,
  session: SessionRow,
  authorization: { authorizationId: string | null; storageGb: number } | StartAuthorization,
): Promise<Provisioned> {
  const { db, clock, logger, settings } = deps;
  const region = deps.cloud.region;
  const sizeGb = "storage" in authorization ? authorization.storage.sizeGb : authorization.storageGb;
  let volume: VolumeRow;
  let instanceId: string;
  let volumeAttached = false;
  try {
    if (session.region !== region) await updateSessionIf(db, session.id, "starting", { region });
    volume = await ensureVolume(deps, session.accountId, sizeGb);
    ({ instanceId, volumeAttached } = await acquireInstance(deps, session, volume));
  } catch (err) {
    if (!(err instanceof CloudCapacityError)) throw err;
    metrics.capacityFailures.inc();
    logger.warn({ sessionId: session.id, region, cloudCode: err.cloudCode }, "no capacity in the region");
    const until = new Date(clock.now().getTime() + settings.capacityRetryAfterSeconds * 1000);
    await markRegionFull(db, region, until);
    return { kind: "full" };
  }
  await clearRegionFull(db, region);
  // Metering starts when the reconciler sees the instance running (session.started), not here.
  const started = await updateSessionIf(db, session.id, "starting", {
    instanceId,
    volumeId: volume.volumeId,
    volumeAttached,
    authorizationId: authorization.authorizationId,
    startedAt: clock.now(),
  });
  if (!started) return { kind: "stopped", instanceId };
  // A pool machine is assigned by the reconciler: now, not at its next interval.
  if (started.capacity !== "cold") deps.wake.reconciler();
  return { kind: "started", row: started };
}

/**
 * The fastest instance there is: a hot pool instance (running, its agent waiting), then a warm one (stopped, booted
 * once: started now), then a new launch. A pool instance that cannot serve (gone, or no capacity to start it) is
 * terminated and the next option tried. The volume is attached here when it can be; otherwise (it is still
 * detaching from the account's last instance) the reconciler attaches it.
 */
async function acquireInstance(
  deps: SessionsDomainDeps,
  session: SessionRow,
  volume: VolumeRow,
): Promise<{ instanceId: string; volumeAttached: boolean }> {
  const { db, cloud, logger, settings } = deps;
  const owner = { sessionId: session.id, accountId: session.accountId };
  const poolsOn = settings.pool.hot.max + settings.pool.warm.max > 0;
  for (const kind of poolsOn ? (["hot", "warm"] as const) : []) {
    const claimed = await claimPoolInstance(db, session.id, volume.availabilityZone, kind);
    if (!claimed) continue;
    const instanceId = claimed.slot.instanceId!;
    try {
      await cloud.claimInstance(instanceId, owner);
      const volumeAttached = await cloud.attachVolume(volume.volumeId, instanceId).then(
        () => true,
        (err: unknown) => {
          logger.info(
            { err, sessionId: session.id, instanceId },
            "volume not attachable yet; the reconciler retries",
          );
          return false;
        },
      );
      if (kind === "warm") await cloud.startInstance(instanceId);
      metrics.sessionStarts.labels(kind).inc();
      return { instanceId, volumeAttached };
    } catch (err) {
      logger.warn(
        { err, sessionId: session.id, instanceId, kind },
        "pool instance could not serve; trying the next",
      );
      await cloud.terminateInstance(instanceId).catch(() => undefined);
      await releaseClaim(db, session.id);
    }
  }
  if (poolsOn) metrics.poolClaimMisses.inc();
  const { instanceId } = await cloud.launchInstance({ ...owner, availabilityZone: volume.availabilityZone });
  metrics.sessionStarts.labels("cold").inc();
  return { instanceId, volumeAttached: false };
}

/**
 * The start gave up after billing may have placed a hold: the row goes, and session.failed (never ran)
 * in the same transaction tells billing to give the hold for this session back at once.
 */
export async function abandonStart(deps: SessionsDomainDeps, session: SessionRow): Promise<void> {
  await deps.db.transaction(async (tx) => {
    await deleteSession(tx, session.id);
    const ended = {
      ...session,
      runningAt: null,
      endedAt: deps.clock.now(),
      message: "The start did not complete",
    };
    await publishSessionFailed(deps, tx, ended, "start_failed");
  });
}

/** The session was stopped (user, credits, purge) while its instance was being launched: undo the launch. */
export async function settleStoppedDuringLaunch(
  deps: SessionsDomainDeps,
  session: SessionRow,
  instanceId: string,
  accessToken: string | undefined,
  authorizationId: string | null,
): Promise<SessionStatus> {
  const { db, cloud, billing, logger, clock } = deps;
  await cloud.terminateInstance(instanceId).catch((err: unknown) => {
    logger.error({ err, instanceId }, "could not terminate the instance of a session stopped during launch");
  });
  if (accessToken && authorizationId) {
    await billing.releaseAuthorization(accessToken, authorizationId).catch(() => undefined);
  }
  const row = await updateSessionIf(db, session.id, "stopping", {
    state: "stopped",
    instanceId,
    endedAt: clock.now(),
  });
  return toSessionStatus(row ?? session, statusView(deps));
}

/** The account's volume, created at its storage tier's size on first use and kept across sessions. */
async function ensureVolume(deps: SessionsDomainDeps, accountId: string, sizeGb: number): Promise<VolumeRow> {
  const { db, cloud, settings } = deps;
  const existing = await findVolume(db, accountId, cloud.region);
  if (existing) {
    if (existing.deleteRequestedAt) {
      throw new AppError("ACCOUNT_PENDING_DELETION", "The account's storage is being deleted");
    }
    return existing;
  }
  const { availabilityZone } = settings;
  const { volumeId } = await cloud.createVolume({ accountId, sizeGb, availabilityZone });
  const saved = await saveVolume(db, {
    accountId,
    volumeId,
    region: cloud.region,
    availabilityZone,
    sizeGb,
  });
  if (saved.volumeId !== volumeId) await cloud.deleteVolume(volumeId).catch(() => undefined);
  return saved;
}
