import { AppError } from "@cgs/shared";
import {
  listDevices,
  markDeviceRemoved,
  markUnpaired,
  pendingUnpairs,
  recordHostClients,
} from "../data/device-repository";
import type { DeviceRow } from "../data/device-tables";
import { findActiveSession } from "../data/session-repository";
import type { SessionRow } from "../data/session-tables";
import type { SessionsDomainDeps } from "./session-deps";

/** openapi.json `Device`. */
export interface DeviceView {
  id: string;
  name: string;
  pairedAt: string;
  lastUsedAt: string | null;
}

const view = (d: DeviceRow): DeviceView => ({
  id: d.id,
  name: d.name,
  pairedAt: d.pairedAt.toISOString(),
  lastUsedAt: d.lastUsedAt ? d.lastUsedAt.toISOString() : null,
});

/**
 * The devices paired with the account's machine: its host keeps them on the account volume across sessions. While
 * a session runs its host is asked first, so a device that paired a moment ago is there.
 */
export async function listAccountDevices(deps: SessionsDomainDeps, accountId: string): Promise<DeviceView[]> {
  const session = await findActiveSession(deps.db, accountId);
  if (session?.state === "running" && session.ready) await syncDevicesQuietly(deps, session);
  return (await listDevices(deps.db, accountId)).map(view);
}

/**
 * Brings the platform's record and the running host together: clients the host lists that the platform has not
 * recorded are recorded (paired now), and devices the player removed are unpaired on the host.
 */
export async function syncDevices(deps: SessionsDomainDeps, session: SessionRow): Promise<DeviceView[]> {
  if (!session.privateNetIp) return [];
  const { streamingHost, db, clock } = deps;
  for (const device of await pendingUnpairs(db, session.accountId)) {
    await streamingHost.unpairClient(session.privateNetIp, session.id, device.hostClientId);
    await markUnpaired(db, [device.id], clock.now());
    deps.logger.info({ sessionId: session.id, deviceId: device.id }, "device unpaired on the host");
  }
  const clients = await streamingHost.listClients(session.privateNetIp, session.id);
  return (await recordHostClients(db, session.accountId, clients, clock.now())).map(view);
}

/** The same, never failing the caller: a host that does not answer now is synced at the next occasion. */
export async function syncDevicesQuietly(
  deps: SessionsDomainDeps,
  session: SessionRow,
): Promise<DeviceView[]> {
  try {
    return await syncDevices(deps, session);
  } catch (err) {
    deps.logger.warn({ err, sessionId: session.id }, "could not sync paired devices with the host");
    return [];
  }
}

/**
 * Unpairs a device: gone from the list at once, and from the host now when the account's session runs, otherwise
 * when the next session's host comes up (its state is on the account volume, which only a running host reads).
 */
export async function removeDevice(deps: SessionsDomainDeps, accountId: string, id: string): Promise<void> {
  const removed = await markDeviceRemoved(deps.db, accountId, id, deps.clock.now());
  if (!removed) throw AppError.notFound("No paired device with that id");
  const session = await findActiveSession(deps.db, accountId);
  if (session?.state === "running" && session.ready) await syncDevicesQuietly(deps, session);
}
