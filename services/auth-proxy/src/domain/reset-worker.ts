import type { Logger } from "pino";
import type { ResetRequestProcessor } from "./password-reset";

export interface ResetWorker {
  /** Wakes the worker now (after a request was queued) instead of at the next interval. */
  kick(): void;
  stop(): Promise<void>;
}

/** Drains waiting reset requests every intervalMs, and at once when kicked. */
export function startResetWorker(
  processor: ResetRequestProcessor,
  options: { intervalMs: number; logger: Logger; onPass?: () => Promise<void> },
): ResetWorker {
  let stopped = false;
  let running: Promise<void> | undefined;
  let again = false;
  let timer: NodeJS.Timeout | undefined;

  const run = (): void => {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    clearTimeout(timer);
    running = (async () => {
      do {
        again = false;
        try {
          await processor.drain();
          await options.onPass?.();
        } catch (err) {
          options.logger.error({ err }, "reset worker pass failed");
        }
      } while (again && !stopped);
    })().finally(() => {
      running = undefined;
      if (!stopped) timer = setTimeout(run, options.intervalMs);
    });
  };
  timer = setTimeout(run, 0);

  return {
    kick: () => setImmediate(run),
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
