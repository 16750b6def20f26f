// Self-contained on purpose (no imports): the SDK uses it, and a browser page that cannot load the SDK's
// CommonJS build (the portal's unbundled client scripts) can copy it as it is.

/** What measuring needs of a region: `GET /api/v1/regions`' items fit. */
export interface BeaconRegion {
  id: string;
  name: string;
  beaconUrl: string;
  available: boolean;
  queueLength: number;
}

/** A region with the median round trip to its beacon. */
export interface MeasuredRegion {
  id: string;
  name: string;
  /** Median of the counted round trips, in ms (0.1 ms steps); null when the beacon did not answer in time. */
  rttMs: number | null;
  /** Round trips counted (the warm-up is not). */
  samples: number;
  available: boolean;
  queueLength: number;
}

export interface MeasureOptions {
  /** Round trips counted per region (default 5), after one warm-up probe that is not counted. */
  samples?: number;
  /** Bound on one probe, in ms (default 2 000); a probe past it counts as lost. */
  timeoutMs?: number;
  /** The fetch to probe with (default: the global one). */
  fetch?: typeof fetch;
  signal?: AbortSignal;
}

export const DEFAULT_MEASURE_SAMPLES = 5;
export const DEFAULT_PROBE_TIMEOUT_MS = 2_000;

/** The middle value (mean of the two middle ones for an even count); null for none. */
export function median(values: readonly number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

const clock = () => globalThis.performance.now();

/** One GET to the beacon: its round trip in ms (until the answer's headers), or null when lost or not 2xx. */
async function probe(url: string, fetchImpl: typeof fetch, timeoutMs: number, outer?: AbortSignal) {
  const timeout = AbortSignal.timeout(timeoutMs);
  const signal = outer ? AbortSignal.any([outer, timeout]) : timeout;
  const began = clock();
  try {
    // no-store: a cached answer would measure nothing; omit: a beacon on another origin gets no cookies.
    // (`cache` is typed by the DOM's RequestInit only; Node's fetch honours it too.)
    const init: RequestInit & { cache?: "no-store" } = { cache: "no-store", credentials: "omit", signal };
    const res = await fetchImpl(url, init);
    const rtt = clock() - began;
    await res.body?.cancel().catch(() => undefined);
    return res.ok ? rtt : null;
  } catch (err) {
    if (outer?.aborted) throw err;
    return null;
  }
}

/**
 * Probes one beacon `samples` times after a warm-up (connection setup is not the player's latency), one probe
 * after another so they do not queue behind each other. A beacon whose warm-up is lost is not probed further.
 */
export async function measureBeacon(
  url: string,
  options: MeasureOptions = {},
): Promise<{ rttMs: number | null; samples: number }> {
  const fetchImpl: typeof fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  const timeoutMs = options.timeoutMs ?? DEFAULT_PROBE_TIMEOUT_MS;
  const wanted = options.samples ?? DEFAULT_MEASURE_SAMPLES;
  if ((await probe(url, fetchImpl, timeoutMs, options.signal)) === null) return { rttMs: null, samples: 0 };
  const counted: number[] = [];
  for (let i = 0; i < wanted; i++) {
    const rtt = await probe(url, fetchImpl, timeoutMs, options.signal);
    if (rtt !== null) counted.push(rtt);
  }
  const mid = median(counted);
  return { rttMs: mid === null ? null : Math.round(mid * 10) / 10, samples: counted.length };
}

/** Lowest round trip first, unreachable last; equal ones keep the given (the service's configured) order. */
export function byRoundTrip(a: MeasuredRegion, b: MeasuredRegion): number {
  if (a.rttMs === null || b.rttMs === null) return (a.rttMs === null ? 1 : 0) - (b.rttMs === null ? 1 : 0);
  return a.rttMs - b.rttMs;
}

/** Measures every region's beacon, all regions at once, and sorts them nearest first. */
export async function measureRegions(
  regions: readonly BeaconRegion[],
  options: MeasureOptions = {},
): Promise<MeasuredRegion[]> {
  const measured = await Promise.all(
    regions.map(async (r): Promise<MeasuredRegion> => {
      const { rttMs, samples } = await measureBeacon(r.beaconUrl, options);
      return { id: r.id, name: r.name, rttMs, samples, available: r.available, queueLength: r.queueLength };
    }),
  );
  return measured.sort(byRoundTrip);
}

/** The `rttMs` map a start with `region: "auto"` sends: the reachable regions' medians by id. */
export function roundTripsById(measured: readonly MeasuredRegion[]): Record<string, number> {
  const map: Record<string, number> = {};
  for (const r of measured) if (r.rttMs !== null) map[r.id] = r.rttMs;
  return map;
}
