import { clockTime, formatMoney } from "@cgs/shared";
import type { SessionRow, SpendLimitStop } from "../data/session-tables";
import type { PlaySettings } from "./session-deps";

/** The automatic stops a running session can be heading for; each is warned about first. */
export type WarningKind = "idle" | "max_length" | "credits" | "spend_limit" | "host_unhealthy";

/** Why a session ended, as poll reports it until the next start. */
export type StopReason =
  | "user"
  | "idle"
  | "max_length"
  | "credits_exhausted"
  | "spend_limit"
  | "account_deletion"
  | "instance_lost"
  | "start_failed";

export interface PendingStop {
  kind: WarningKind;
  /** When the session stops unless something changes. */
  stopsAt: Date;
  /** From when poll warns about it. */
  warnFrom: Date;
}

export interface PlayWarning {
  kind: WarningKind;
  stopsAt: Date;
  /** Keep playing (POST /sessions/keepalive) postpones it: idle and maximum length only, never credit or a limit. */
  canKeepPlaying: boolean;
  message: string;
}

const at = (ms: number) => new Date(ms);

function duration(minutes: number): string {
  if (minutes % 60 === 0) return `${minutes / 60} h`;
  return minutes > 60 ? `${Math.floor(minutes / 60)} h ${minutes % 60} min` : `${minutes} min`;
}

/** The latest of some times (nulls skipped); at least one must be set. */
export const latest = (...dates: (Date | null)[]) =>
  dates.reduce<Date | null>((a, b) => (b && (!a || b > a) ? b : a), null)!;

/**
 * The moment the idle clock counts from: the last play the host saw, or the last Keep playing. A connected
 * streaming client is play only while one of the player's devices is on the private network (the second signal):
 * once none has been since `deviceAbsentSince`, only input counts, and the client's play ends there.
 */
export function idleBase(row: SessionRow): Date {
  const running = row.runningAt ?? row.createdAt;
  const seen = row.playSeenAt ?? running;
  const play = row.deviceAbsentSince
    ? latest(running, row.inputSeenAt, seen < row.deviceAbsentSince ? seen : row.deviceAbsentSince)
    : seen;
  return latest(play, row.keptAliveAt);
}

/** Every automatic stop the running session is heading for, with when poll starts warning about each. */
export function pendingStops(row: SessionRow, play: PlaySettings): PendingStop[] {
  if (row.state !== "running") return [];
  const minute = play.minuteMs;
  const running = (row.runningAt ?? row.createdAt).getTime();
  const stops: PendingStop[] = [];

  const idleMs = row.idleTimeoutMinutes * minute;
  const idleStop = idleBase(row).getTime() + idleMs;
  const idleLead = Math.min(play.idleWarningMinutes * minute, idleMs / 2);
  stops.push({ kind: "idle", stopsAt: at(idleStop), warnFrom: at(idleStop - idleLead) });

  const lengthMs = row.maxLengthMinutes * minute;
  const lengthStop = running + (row.maxLengthMinutes + row.lengthExtendedMinutes) * minute;
  const lengthLead = Math.min(play.maxLengthWarningMinutes * minute, lengthMs / 2);
  stops.push({ kind: "max_length", stopsAt: at(lengthStop), warnFrom: at(lengthStop - lengthLead) });

  // Billing says when it stops paying (the balance runs out, or a spending limit is reached) only once that is
  // near, so its forecast is a warning at once.
  if (row.creditsStopAt) {
    const kind = row.creditsStopLimit ? "spend_limit" : "credits";
    stops.push({ kind, stopsAt: row.creditsStopAt, warnFrom: at(0) });
  }

  if (row.ready) {
    const heard = (row.hostSeenAt ?? row.runningAt ?? row.createdAt).getTime();
    stops.push({
      kind: "host_unhealthy",
      stopsAt: at(heard + play.hostLostMs),
      warnFrom: at(heard + play.hostStaleMs),
    });
  }
  return stops;
}

/** The stop poll warns about now: of those whose warning has begun, the soonest. */
export function currentWarning(row: SessionRow, now: Date, play: PlaySettings): PendingStop | undefined {
  let soonest: PendingStop | undefined;
  for (const stop of pendingStops(row, play)) {
    if (stop.warnFrom > now) continue;
    if (!soonest || stop.stopsAt < soonest.stopsAt) soonest = stop;
  }
  return soonest;
}

export function describeWarning(
  row: SessionRow,
  stop: PendingStop,
  now: Date,
  play: PlaySettings,
): PlayWarning {
  const when = clockTime(stop.stopsAt);
  const minutesLeft = Math.max(0, Math.ceil((stop.stopsAt.getTime() - now.getTime()) / play.minuteMs));
  switch (stop.kind) {
    case "idle": {
      const quiet = Math.max(1, Math.floor((now.getTime() - idleBase(row).getTime()) / play.minuteMs));
      return {
        kind: "idle",
        stopsAt: stop.stopsAt,
        canKeepPlaying: true,
        message: `No input for ${quiet} min: this session stops at ${when} unless you play or choose Keep playing.`,
      };
    }
    case "max_length":
      return {
        kind: "max_length",
        stopsAt: stop.stopsAt,
        canKeepPlaying: true,
        message:
          `This session reaches its maximum length of ${duration(row.maxLengthMinutes + row.lengthExtendedMinutes)}` +
          ` at ${when} and stops then unless you choose Keep playing (${duration(play.extensionMinutes)} more).`,
      };
    case "credits":
      return {
        kind: "credits",
        stopsAt: stop.stopsAt,
        canKeepPlaying: false,
        message: `Your credit covers about ${minutesLeft} more min: this session stops at ${when} unless you top up.`,
      };
    case "spend_limit":
      return {
        kind: "spend_limit",
        stopsAt: stop.stopsAt,
        canKeepPlaying: false,
        message:
          `Your ${limitWords(row.creditsStopLimit)} allows about ${minutesLeft} more min: this session stops at ` +
          `${when} unless you raise the limit.`,
      };
    case "host_unhealthy": {
      const heard = clockTime(row.hostSeenAt ?? row.runningAt ?? row.createdAt);
      return {
        kind: "host_unhealthy",
        stopsAt: stop.stopsAt,
        canKeepPlaying: false,
        message:
          `The streaming host has not reported since ${heard}: this session ends at ${when} unless it recovers;` +
          ` nothing is charged after ${heard}.`,
      };
    }
  }
}

/** "daily spending limit of 20.00 USD": a limit named as the player set it. */
function limitWords(limit: SpendLimitStop | null | undefined): string {
  if (!limit) return "spending limit";
  return `${limit.period === "day" ? "daily" : "monthly"} spending limit of ${formatMoney(limit.amount, limit.currency)}`;
}

/** The words poll keeps after a stop, until the next start (`limit`: the spending limit of a spend_limit stop). */
export function stopMessage(
  reason: StopReason,
  row: Pick<
    SessionRow,
    "idleTimeoutMinutes" | "maxLengthMinutes" | "lengthExtendedMinutes" | "deviceAbsentSince"
  >,
  limit?: SpendLimitStop,
): string {
  switch (reason) {
    case "user":
      return "Stopped at your request.";
    case "idle":
      return row.deviceAbsentSince
        ? `Stopped after ${row.idleTimeoutMinutes} min without play (no input, and none of your devices on the private network).`
        : `Stopped after ${row.idleTimeoutMinutes} min without play (no streaming client connected and no input).`;
    case "max_length":
      return `Stopped at the maximum session length of ${duration(row.maxLengthMinutes + row.lengthExtendedMinutes)}.`;
    case "credits_exhausted":
      return "Stopped because the credit ran out; top up to play again.";
    case "spend_limit": {
      const again = !limit
        ? ""
        : limit.period === "day"
          ? " until 00:00 UTC"
          : " until the 1st of next month (UTC)";
      return `Stopped at your ${limitWords(limit)}; it allows no more play${again} unless you raise it.`;
    }
    case "account_deletion":
      return "Stopped because the account is being deleted.";
    case "instance_lost":
      return "The instance stopped unexpectedly.";
    case "start_failed":
      return "The session could not start.";
  }
}
