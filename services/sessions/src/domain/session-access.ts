import { createHmac, randomInt } from "node:crypto";
import { AppError, metrics } from "@cgs/shared";
import {
  findActiveSession,
  findLatestSession,
  savePinDigest,
  touchActivity,
} from "../data/session-repository";
import type { SessionRow } from "../data/session-tables";
import { mintDeviceKey } from "./private-network-keys";
import type { SessionsDomainDeps } from "./session-deps";
import { toSessionStatus, type SessionStatus } from "./session-status";

/** Records activity at most once per granularity, so frequent polls cost no writes. */
async function noteActivity(deps: SessionsDomainDeps, row: SessionRow): Promise<void> {
  const now = deps.clock.now();
  if (now.getTime() - row.lastActivityAt.getTime() < deps.settings.activityGranularityMs) return;
  await touchActivity(deps.db, row.id, now);
}

/** Answered from the service's own state only: no cloud call per poll. */
export async function pollSession(deps: SessionsDomainDeps, accountId: string): Promise<SessionStatus> {
  const row = await findLatestSession(deps.db, accountId);
  if (row && (row.state === "starting" || row.state === "running")) await noteActivity(deps, row);
  return toSessionStatus(row);
}

/** The account's starting or running session; stopping counts as not running. */
async function liveSession(deps: SessionsDomainDeps, accountId: string): Promise<SessionRow> {
  const row = await findActiveSession(deps.db, accountId);
  if (!row || row.state === "stopping") {
    throw new AppError("SESSION_NOT_RUNNING", "There is no running session");
  }
  await noteActivity(deps, row);
  return row;
}

export interface PairingPin {
  pin: string;
  expiresAt: string;
}

export function pinDigest(secret: string, sessionId: string, pin: string): string {
  return createHmac("sha256", secret).update(`${sessionId}:${pin}`).digest("hex");
}

/** Mints a four-digit PIN (CSPRNG), hands it to the streaming host, keeps only its HMAC. */
export async function createPairingPin(deps: SessionsDomainDeps, accountId: string): Promise<PairingPin> {
  const { settings, streamingHost, logger, clock } = deps;
  const { pairing } = settings;
  const session = await liveSession(deps, accountId);
  if (!session.ready || !session.privateNetIp) {
    metrics.pairingFailures.labels("not_ready").inc();
    throw new AppError("NOT_READY", "The session is not ready for pairing yet; poll until ready is true");
  }
  const pin = String(randomInt(0, 10_000)).padStart(4, "0");
  let lastError: unknown;
  let accepted = false;
  for (let attempt = 1; attempt <= pairing.attempts && !accepted; attempt += 1) {
    try {
      await streamingHost.submitPin(session.privateNetIp, session.id, pin, "cgs-client");
      accepted = true;
    } catch (err) {
      lastError = err;
      // The host may still be coming up (or restarting its web UI): wait and try again.
      if (attempt < pairing.attempts) {
        await new Promise((resolve) => setTimeout(resolve, pairing.retryDelayMs));
      }
    }
  }
  if (!accepted) {
    metrics.pairingFailures.labels("host_unavailable").inc();
    logger.warn({ err: lastError, sessionId: session.id }, "streaming host refused the pairing PIN");
    throw AppError.unavailable("The streaming host is not answering; try pairing again shortly", 5);
  }
  const expiresAt = new Date(clock.now().getTime() + pairing.pinTtlSeconds * 1000);
  await savePinDigest(deps.db, session.id, pinDigest(pairing.pinHashSecret, session.id, pin), expiresAt);
  return { pin, expiresAt: expiresAt.toISOString() };
}

export async function getConnectInfo(
  deps: SessionsDomainDeps,
  accountId: string,
): Promise<{ privateNetIp: string; port: number }> {
  const session = await liveSession(deps, accountId);
  if (!session.privateNetIp) {
    throw new AppError("NOT_READY", "The instance has no private-network address yet; poll until running");
  }
  return { privateNetIp: session.privateNetIp, port: deps.settings.streamingPort };
}

export async function createVpnKey(
  deps: SessionsDomainDeps,
  accountId: string,
): Promise<{ key: string; expiresAt: string; loginServer?: string }> {
  const session = await liveSession(deps, accountId);
  const key = await mintDeviceKey(deps, accountId, session.id);
  const loginServer = deps.privateNetwork.loginServer;
  return { key: key.key, expiresAt: key.expiresAt.toISOString(), ...(loginServer ? { loginServer } : {}) };
}
