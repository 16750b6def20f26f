import type { SessionsDb } from "../data/session-repository";
import { recentStartToReady } from "../data/pool-repository";
import type { Capacity } from "./session-deps";

const WINDOW_MS = 24 * 60 * 60_000;
const REFRESH_MS = 60_000;
/** Fewer measured starts than this and the configured figure stands. */
const MIN_SAMPLES = 5;

/**
 * How long a start typically takes to be ready, by where its instance came from: the median of the last day's
 * starts (up to 300), the configured figure until there are enough. Read without waiting (poll answers from it);
 * refreshed in the background by the reconciler's ticks.
 */
export class StartEstimates {
  private measured: Partial<Record<Capacity, number>> = {};
  private refreshedAt = -Infinity;

  constructor(private readonly defaults: Record<Capacity, number>) {}

  typicalMs(capacity: Capacity): number {
    return this.measured[capacity] ?? this.defaults[capacity];
  }

  async refresh(db: SessionsDb, now: Date): Promise<void> {
    if (now.getTime() - this.refreshedAt < REFRESH_MS) return;
    this.refreshedAt = now.getTime();
    const samples = await recentStartToReady(db, new Date(now.getTime() - WINDOW_MS));
    const measured: Partial<Record<Capacity, number>> = {};
    for (const capacity of ["hot", "warm", "cold"] as const) {
      const sorted = [...samples[capacity]].sort((a, b) => a - b);
      if (sorted.length >= MIN_SAMPLES) measured[capacity] = sorted[Math.floor(sorted.length / 2)]!;
    }
    this.measured = measured;
  }
}

const PHASE: Record<Capacity, string> = {
  hot: "Preparing a machine that is already running",
  warm: "Starting a warm machine",
  cold: "Starting a new machine",
};

/** "about 25 s", "about 3 min" (rounded up to 5 s, then to whole minutes past 90 s). */
function about(ms: number): string {
  const seconds = Math.max(5, Math.ceil(ms / 5_000) * 5);
  return seconds > 90 ? `about ${Math.ceil(seconds / 60)} min` : `about ${seconds} s`;
}

/** Poll's message while a session starts: the phase and what is left of its typical time. */
export function startingMessage(capacity: Capacity, elapsedMs: number, typicalMs: number): string {
  const left = typicalMs - elapsedMs;
  return left > 0 ? `${PHASE[capacity]}, ${about(left)}` : `${PHASE[capacity]}, taking longer than usual`;
}
