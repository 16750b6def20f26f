/**
 * The regions and the browser's round trip to each: GET /api/v1/regions, then every region's latency beacon
 * probed a few times. The SDK's `regions.measure()` does the same for Node and scripts; it is CommonJS and this
 * page loads plain ES modules with no bundler, so the probe is repeated here, small, with the same rules.
 */
import type { components } from "@cgs/sdk";
import { api, type ApiFailure } from "./api.js";

export type Region = components["schemas"]["Region"];

export interface MeasuredRegion extends Region {
  /** Median round trip in ms over the counted samples; null when the beacon never answered in time. */
  rttMs: number | null;
}

/** Five probes, the first a warm-up (DNS, TCP and TLS set-up), like the SDK's default. */
const SAMPLES = 5;
export const COUNTED_SAMPLES = SAMPLES - 1;
const TIMEOUT_MS = 2_000;

export function median(values: readonly number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** One beacon, probed one request after another (parallel probes to one origin would queue on each other). */
async function probe(beaconUrl: string): Promise<number | null> {
  const counted: number[] = [];
  for (let i = 0; i < SAMPLES; i += 1) {
    const began = performance.now();
    try {
      const res = await fetch(beaconUrl, {
        cache: "no-store",
        credentials: "omit",
        mode: "cors",
        signal: AbortSignal.timeout(TIMEOUT_MS),
      });
      if (!res.ok) continue;
      if (i > 0) counted.push(performance.now() - began);
    } catch {
      // Unreachable or too slow: this sample does not count.
    }
  }
  const rtt = median(counted);
  return rtt === null ? null : Math.round(rtt);
}

/** Lowest round trip first; regions that never answered last, in the service's order. */
export function nearestFirst(regions: readonly MeasuredRegion[]): MeasuredRegion[] {
  return [...regions].sort((a, b) => (a.rttMs ?? Infinity) - (b.rttMs ?? Infinity));
}

export async function listRegions(): Promise<
  { ok: true; regions: Region[] } | { ok: false; failure: ApiFailure }
> {
  const res = await api<components["schemas"]["RegionList"]>("GET", "/regions");
  return res.ok ? { ok: true, regions: res.body.items } : { ok: false, failure: res.failure };
}

/** Every region's median round trip, measured in parallel across regions, nearest first. */
export async function measure(regions: readonly Region[]): Promise<MeasuredRegion[]> {
  const measured = await Promise.all(
    regions.map(async (region) => ({ ...region, rttMs: await probe(region.beaconUrl) })),
  );
  return nearestFirst(measured);
}
