import type { ComponentLogger } from "@cgs/shared";

export interface PeriodicWorker {
  /** Stops scheduling and waits for the pass in flight. */
  stop(): Promise<void>;
}

/** Runs `pass` now and then every `intervalMs` after the previous pass ends; a failing pass is logged. */
export function startPeriodicWorker(
  name: string,
  intervalMs: number,
  pass: () => Promise<unknown>,
  logger: ComponentLogger,
): PeriodicWorker {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let inFlight: Promise<void> = Promise.resolve();
  const run = async () => {
    timer = undefined;
    try {
      await pass();
    } catch (err) {
      logger.error({ err, worker: name }, "worker pass failed");
    }
    if (!stopped) timer = setTimeout(schedule, intervalMs);
  };
  const schedule = () => {
    inFlight = run();
  };
  schedule();
  return {
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await inFlight;
    },
  };
}
