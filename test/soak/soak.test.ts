import { runSoak, type SoakResult } from "./soak-run";

// The soak harness itself (test/soak): the whole platform (npm start's launcher) on its own PostgreSQL and Redis and
// behind cuttable SQS and identity-provider hops, four players for one minute of load with a fixed seed's fault
// schedule (every fault kind once), then the audit. Free ports only, so no platform lock is needed. `npm run soak`
// is the long run, on demand.
jest.setTimeout(420_000);

let result: SoakResult;
const lines: string[] = [];

beforeAll(async () => {
  result = await runSoak({ players: 4, minutes: 1, seed: 35, log: (line) => lines.push(line) });
});

describe("the soak: players, faults and the audit of the books", () => {
  it("when the fixed-seed schedule has killed, cut and restarted every kind of fault under load, then players completed journeys and every fault kind was injected", () => {
    expect(result.stats.journeysCompleted).toBeGreaterThan(0);
    expect(result.stats.topups).toBeGreaterThan(0);
    const injected = new Set(result.windows.filter((w) => !w.skipped).map((w) => w.kind));
    // A lost instance needs a running session at that moment; every other kind always runs.
    expect(result.schedule.filter((f) => f.kind !== "instance:lose" && !injected.has(f.kind))).toEqual([]);
  });

  it("when the platform has settled after the load, then every invariant of the audit holds (the report names each violation)", () => {
    const violated = result.audit.invariants.filter((i) => i.violations.length > 0);
    // The whole report and the soak's log in the failure: the seed replays the schedule.
    expect({ violated, report: result.report, log: lines.join("\n") }).toEqual({
      violated: [],
      report: result.report,
      log: lines.join("\n"),
    });
  });
});
