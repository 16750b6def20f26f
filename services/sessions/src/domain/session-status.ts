import type { SessionRow } from "../data/session-tables";
import { currentWarning, describeWarning, type StopReason, type WarningKind } from "./play-state";
import type { Capacity, PlaySettings } from "./session-deps";
import { startingMessage } from "./start-estimates";
import type { QueuePlace } from "./queue";

export type SessionState = "idle" | "queued" | "starting" | "running" | "stopping" | "stopped" | "failed";

/** An automatic stop poll is warning about (openapi.json `SessionWarning`). */
export interface SessionWarning {
  kind: WarningKind;
  stopsAt: string;
  canKeepPlaying: boolean;
}

/**
 * The flat poll resource: spec 2.1's fields, every one present and null when it has no value, plus the
 * additions `warning` (an automatic stop ahead) and `stopReason` (why it ended, until the next start).
 */
export interface SessionStatus {
  state: SessionState;
  instanceId: string | null;
  publicIp: string | null;
  privateNetIp: string | null;
  startedAt: string | null;
  ready: boolean;
  message: string | null;
  warning: SessionWarning | null;
  stopReason: StopReason | null;
  /** Where it runs; null with no session and while queued. */
  region: string | null;
  /** The place in line while queued. */
  queue: QueuePlace | null;
}

export const IDLE_STATUS: SessionStatus = {
  state: "idle",
  instanceId: null,
  publicIp: null,
  privateNetIp: null,
  startedAt: null,
  ready: false,
  message: null,
  warning: null,
  stopReason: null,
  region: null,
  queue: null,
};

/** What the answer depends on besides the row: the time it is asked, the play settings, typical start times. */
export interface StatusView {
  now: Date;
  play: PlaySettings;
  estimates?: { typicalMs(capacity: Capacity): number };
}

/** While the machine comes up: the phase and an estimate ("Starting a warm machine, about 25 s"). */
function progressMessage(row: SessionRow, view: StatusView): string | null {
  const starting = row.state === "starting" || (row.state === "running" && !row.ready);
  if (!starting || !view.estimates) return null;
  if (!row.instanceId) return "Finding a machine";
  const elapsed = view.now.getTime() - row.createdAt.getTime();
  return startingMessage(row.capacity, elapsed, view.estimates.typicalMs(row.capacity));
}

export function toSessionStatus(
  row: SessionRow | undefined,
  view: StatusView,
  /** A queued session's place in line (queuePlace), with what it means in words. */
  queue?: { place: QueuePlace; message: string } | null,
): SessionStatus {
  if (!row) return { ...IDLE_STATUS };
  const live = row.state === "starting" || row.state === "running";
  const pending = currentWarning(row, view.now, view.play);
  const warning = pending && describeWarning(row, pending, view.now, view.play);
  return {
    state: row.state,
    instanceId: row.instanceId,
    // Addresses of an instance that is gone would mislead a client into connecting.
    publicIp: live ? row.publicIp : null,
    privateNetIp: live ? row.privateNetIp : null,
    startedAt: (row.startedAt ?? row.createdAt).toISOString(),
    ready: row.state === "running" && row.ready,
    message: warning?.message ?? row.message ?? progressMessage(row, view),
    warning: warning
      ? { kind: warning.kind, stopsAt: warning.stopsAt.toISOString(), canKeepPlaying: warning.canKeepPlaying }
      : null,
    stopReason: live || row.state === "queued" ? null : ((row.stopReason as StopReason | null) ?? null),
    region: row.state === "queued" ? null : row.region,
    queue: row.state === "queued" ? (queue?.place ?? null) : null,
    ...(row.state === "queued" && queue ? { message: queue.message } : {}),
  };
}

/** A stored answer from before `warning`, `stopReason`, `region` and `queue` existed (idempotent replays) gains them as null. */
export function withCurrentFields(stored: Partial<SessionStatus>): SessionStatus {
  return {
    ...IDLE_STATUS,
    warning: null,
    stopReason: null,
    region: null,
    queue: null,
    ...stored,
  } as SessionStatus;
}

/** The view at this moment for a use case's dependencies. */
export function statusView(deps: {
  clock: { now(): Date };
  settings: { play: PlaySettings };
  estimates?: StatusView["estimates"];
}): StatusView {
  return { now: deps.clock.now(), play: deps.settings.play, estimates: deps.estimates };
}
