import type { ComponentLogger } from "../db";

export interface PeriodicWorker {
  /** Runs a pass as soon as possible; if one is in flight, another follows it at once. */
  kick(): void;
  /** Stops scheduling and waits for the pass in flight. */
  stop(): Promise<void>;
}

/**
 * Runs `pass` now and then `intervalMs` after each pass ends (never two at once in this process; replicas
 * coordinate through the database). A failing pass is logged and the next one runs on schedule.
 */
export function startPeriodicWorker(
  name: string,
  intervalMs: number,
  pass: () => Promise<unknown>,
  logger: ComponentLogger,
): PeriodicWorker {
  let stopped = false;
  let again = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;

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
          await pass();
        } catch (err) {
          logger.error({ err, worker: name }, "worker pass failed");
        }
      } while (again && !stopped);
    })().finally(() => {
      running = undefined;
      if (!stopped) timer = setTimeout(run, intervalMs);
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
