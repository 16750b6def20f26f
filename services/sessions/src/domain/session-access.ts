import { createHmac, randomInt } from "node:crypto";
import { AppError, metrics } from "@cgs/shared";
import { findActiveSession, findLatestSession, savePinDigest } from "../data/session-repository";
import type { SessionRow } from "../data/session-tables";
import { syncDevicesQuietly } from "./devices";
import { queuedStatus } from "./queue";
import { mintDeviceKey } from "./private-network-keys";
import type { SessionsDomainDeps } from "./session-deps";
import { statusView, toSessionStatus, type SessionStatus } from "./session-status";

/**
 * Answered from the service's own state only: no cloud call and no write per poll. Polling is not play: a portal
 * tab left open does not keep a session alive (the host agent's reports do).
 */
export async function pollSession(deps: SessionsDomainDeps, accountId: string): Promise<SessionStatus> {
  const row = await findLatestSession(deps.db, accountId);
  if (row?.state === "queued") return queuedStatus(deps, row);
  return toSessionStatus(row, statusView(deps));
}

/** The account's starting or running session; stopping counts as not running. */
async function liveSession(deps: SessionsDomainDeps, accountId: string): Promise<SessionRow> {
  const row = await findActiveSession(deps.db, accountId);
  if (!row || row.state === "stopping" || row.state === "queued") {
    throw new AppError("SESSION_NOT_RUNNING", "There is no running session");
  }
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
export async function createPairingPin(
  deps: SessionsDomainDeps,
  accountId: string,
  deviceName = "Streaming client",
): Promise<PairingPin> {
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
      await streamingHost.submitPin(session.privateNetIp, session.id, pin, deviceName);
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
  recordPairedDevice(deps, session);
  return { pin, expiresAt: expiresAt.toISOString() };
}

/**
 * The client finishes pairing on its side moments after the host took the PIN: the host's client list is read a
 * few times after it (in the background), and what is new is recorded as a paired device.
 */
function recordPairedDevice(deps: SessionsDomainDeps, session: SessionRow): void {
  const delays = [0, 2_000, 5_000, 10_000];
  const attempt = async (n: number): Promise<void> => {
    if ((await syncDevicesQuietly(deps, session)).length > 0 || n + 1 >= delays.length) return;
    setTimeout(() => void attempt(n + 1), delays[n + 1]).unref();
  };
  void attempt(0);
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
