import { silentLogger, type ComponentLogger } from "../db";
import { startPeriodicWorker } from "./periodic-worker";

const settle = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("periodic worker", () => {
  it("when started, then it runs a pass at once and again after each interval, never two at once", async () => {
    let active = 0;
    let maxActive = 0;
    let passes = 0;
    const worker = startPeriodicWorker(
      "test",
      20,
      async () => {
        active += 1;
        maxActive = Math.max(maxActive, active);
        await settle(15);
        passes += 1;
        active -= 1;
      },
      silentLogger,
    );
    for (let i = 0; i < 5; i += 1) worker.kick();
    await settle(200);
    await worker.stop();
    expect(passes).toBeGreaterThanOrEqual(3);
    expect(maxActive).toBe(1);
  });

  it("when a pass fails, then the failure is logged and the next pass still runs", async () => {
    const errors: unknown[] = [];
    const logger: ComponentLogger = { ...silentLogger, error: (obj: unknown) => void errors.push(obj) };
    let calls = 0;
    const worker = startPeriodicWorker(
      "flaky",
      10,
      async () => {
        calls += 1;
        if (calls === 1) throw new Error("boom");
      },
      logger,
    );
    await settle(100);
    await worker.stop();
    expect(calls).toBeGreaterThanOrEqual(2);
    expect(errors).toHaveLength(1);
  });

  it("when stopped during a pass, then stop waits for it and no pass runs afterwards", async () => {
    let finished = false;
    let calls = 0;
    const worker = startPeriodicWorker(
      "slow",
      5,
      async () => {
        calls += 1;
        await settle(50);
        finished = true;
      },
      silentLogger,
    );
    await settle(10);
    await worker.stop();
    expect(finished).toBe(true);
    const after = calls;
    await settle(50);
    expect(calls).toBe(after);
  });
});
