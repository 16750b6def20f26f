import type { SessionRow } from "../data/session-tables";

export type SessionState = "idle" | "starting" | "running" | "stopping" | "stopped" | "failed";

/** The flat poll resource of spec 2.1; every field present, null when it has no value. */
export interface SessionStatus {
  state: SessionState;
  instanceId: string | null;
  publicIp: string | null;
  privateNetIp: string | null;
  startedAt: string | null;
  ready: boolean;
  message: string | null;
}

export const IDLE_STATUS: SessionStatus = {
  state: "idle",
  instanceId: null,
  publicIp: null,
  privateNetIp: null,
  startedAt: null,
  ready: false,
  message: null,
};

export function toSessionStatus(row: SessionRow | undefined): SessionStatus {
  if (!row) return { ...IDLE_STATUS };
  const live = row.state === "starting" || row.state === "running";
  return {
    state: row.state,
    instanceId: row.instanceId,
    // Addresses of an instance that is gone would mislead a client into connecting.
    publicIp: live ? row.publicIp : null,
    privateNetIp: live ? row.privateNetIp : null,
    startedAt: (row.startedAt ?? row.createdAt).toISOString(),
    ready: row.state === "running" && row.ready,
    message: row.message,
  };
}
