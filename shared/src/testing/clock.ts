import type { Clock } from "../clock";

/** A clock a test moves by hand: use cases see only the time it is told. */
export interface TestClock extends Clock {
  set(at: Date | string): void;
  advance(ms: number): void;
}

export function testClock(start: Date | string = new Date()): TestClock {
  let current = new Date(start);
  return {
    now: () => new Date(current),
    set: (at) => {
      current = new Date(at);
    },
    advance: (ms) => {
      current = new Date(current.getTime() + ms);
    },
  };
}
