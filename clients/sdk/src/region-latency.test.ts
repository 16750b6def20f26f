import http from "node:http";
import type { AddressInfo } from "node:net";
import { createClient } from "./client";
import { measureBeacon, measureRegions, median, type BeaconRegion } from "./region-latency";

// Real HTTP beacons on loopback, each answering 204 after the delay the test gives its n-th request.
interface Beacon {
  url: string;
  requests: { at: number; authorization?: string; cookie?: string }[];
  /** Most requests this beacon had in flight at once. */
  maxInFlight: number;
  close(): Promise<void>;
}

const open: Beacon[] = [];

async function startBeacon(delayOf: (n: number) => number, status = 204): Promise<Beacon> {
  let inFlight = 0;
  const timers = new Set<NodeJS.Timeout>();
  const beacon: Beacon = { url: "", requests: [], maxInFlight: 0, close: async () => undefined };
  const server = http.createServer((req, res) => {
    const n = beacon.requests.length;
    beacon.requests.push({
      at: performance.now(),
      authorization: req.headers.authorization,
      cookie: req.headers.cookie,
    });
    inFlight++;
    beacon.maxInFlight = Math.max(beacon.maxInFlight, inFlight);
    const timer = setTimeout(() => {
      timers.delete(timer);
      inFlight--;
      res.writeHead(status, { "Cache-Control": "no-store" }).end();
    }, delayOf(n));
    timers.add(timer);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  beacon.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/beacon`;
  beacon.close = () =>
    new Promise<void>((resolve) => {
      for (const timer of timers) clearTimeout(timer);
      server.closeAllConnections();
      server.close(() => resolve());
    });
  open.push(beacon);
  return beacon;
}

/** A loopback port nothing listens on: a beacon there refuses every connection. */
async function refusedUrl(): Promise<string> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}/beacon`;
}

const region = (id: string, beaconUrl: string): BeaconRegion => ({
  id,
  name: id,
  beaconUrl,
  available: true,
  queueLength: 0,
});

afterEach(async () => {
  await Promise.all(open.splice(0).map((b) => b.close()));
});

describe("median", () => {
  test("when the count is odd or even, then the middle value (or the mean of the two middle ones) comes back", () => {
    expect(median([30, 10, 500, 20, 25])).toBe(25);
    expect(median([40, 10, 20, 30])).toBe(25);
    expect(median([])).toBeNull();
  });
});

describe("measuring a beacon", () => {
  test("when one counted round trip is a slow outlier, then the median is the usual round trip, not the mean", async () => {
    // Request 0 is the warm-up; request 3 stalls for 400 ms.
    const beacon = await startBeacon((n) => (n === 3 ? 400 : 30));
    const measured = await measureBeacon(beacon.url, { samples: 5 });
    expect(beacon.requests).toHaveLength(6);
    expect(measured.samples).toBe(5);
    expect(measured.rttMs).toBeGreaterThanOrEqual(30);
    // The mean of the five would be above 100 ms.
    expect(measured.rttMs).toBeLessThan(80);
  });

  test("when the warm-up is slow (connection setup), then it is not counted", async () => {
    const beacon = await startBeacon((n) => (n === 0 ? 600 : 20));
    const measured = await measureBeacon(beacon.url, { samples: 3 });
    expect(beacon.requests).toHaveLength(4);
    expect(measured).toMatchObject({ samples: 3 });
    expect(measured.rttMs).toBeLessThan(100);
  });

  test("when a beacon answers but not with a 2xx, then it counts as unreachable", async () => {
    const beacon = await startBeacon(() => 5, 500);
    expect(await measureBeacon(beacon.url, { samples: 3 })).toEqual({ rttMs: null, samples: 0 });
    // A lost warm-up ends the measurement: no point probing a beacon that does not answer.
    expect(beacon.requests).toHaveLength(1);
  });
});

describe("measuring regions", () => {
  test("when beacons differ in latency and some cannot be reached, then the nearest comes first and the unreachable last, with null", async () => {
    const far = await startBeacon(() => 120);
    const near = await startBeacon(() => 10);
    const hanging = await startBeacon(() => 5_000);
    const regions = [
      region("us-east-1", far.url),
      region("eu-central-1", await refusedUrl()),
      region("eu-west-1", near.url),
      region("ap-southeast-1", hanging.url),
    ];
    const began = performance.now();
    const measured = await measureRegions(regions, { samples: 4, timeoutMs: 400 });
    const tookMs = performance.now() - began;

    expect(measured.map((r) => [r.id, r.rttMs === null ? null : "measured", r.samples])).toEqual([
      ["eu-west-1", "measured", 4],
      ["us-east-1", "measured", 4],
      ["eu-central-1", null, 0],
      ["ap-southeast-1", null, 0],
    ]);
    expect(measured[0]!.rttMs).toBeGreaterThanOrEqual(10);
    expect(measured[0]!.rttMs).toBeLessThan(100);
    expect(measured[1]!.rttMs).toBeGreaterThanOrEqual(120);
    // Within one region the probes follow one another; the regions are measured at the same time (the far one
    // alone takes 5 × 120 ms, the four in a row would take well over a second more).
    expect(far.maxInFlight).toBe(1);
    expect(near.maxInFlight).toBe(1);
    expect(tookMs).toBeLessThan(1_200);
    expect(measured[0]).toEqual({
      id: "eu-west-1",
      name: "eu-west-1",
      rttMs: measured[0]!.rttMs,
      samples: 4,
      available: true,
      queueLength: 0,
    });
  });

  test("when the SDK client measures, then beacons get no bearer token and no cookie", async () => {
    const beacon = await startBeacon(() => 5);
    // A listener of the test's own answers the regions list; the beacon is the test's too.
    const api = http.createServer((_req, res) => {
      res
        .writeHead(200, { "Content-Type": "application/json" })
        .end(JSON.stringify({ items: [region("eu-west-1", beacon.url)] }));
    });
    await new Promise<void>((resolve) => api.listen(0, "127.0.0.1", resolve));
    try {
      const client = createClient({
        baseUrl: `http://127.0.0.1:${(api.address() as AddressInfo).port}`,
        apiKey: "secret-access-token",
      });
      const measured = await client.regions.measure({ samples: 2 });
      expect(measured).toEqual([expect.objectContaining({ id: "eu-west-1", samples: 2 })]);
      expect(beacon.requests).toHaveLength(3);
      for (const r of beacon.requests)
        expect(r).toMatchObject({ authorization: undefined, cookie: undefined });
    } finally {
      await new Promise<void>((resolve) => api.close(() => resolve()));
    }
  });
});
