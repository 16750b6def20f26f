import { AppError } from "@cgs/shared";
import type { CloudProvider } from "../adapters/cloud-provider";
import { queueLengths, regionsFull } from "../data/queue-repository";
import type { SessionsDomainDeps } from "./session-deps";

/** A region sessions run in: its own fleet (cloud), the zone its volumes go to, and its latency beacon. */
export interface RegionFleet {
  id: string;
  name: string;
  availabilityZone: string;
  beaconUrl: string;
  cloud: CloudProvider;
}

/** The regions from config, in their configured order (the order a start without measurements tries). */
export class RegionDirectory {
  private readonly byId: Map<string, RegionFleet>;

  constructor(readonly fleets: readonly RegionFleet[]) {
    if (fleets.length === 0) throw new Error("at least one region is needed");
    this.byId = new Map(fleets.map((f) => [f.id, f]));
  }

  get ids(): string[] {
    return this.fleets.map((f) => f.id);
  }

  get(id: string): RegionFleet | undefined {
    return this.byId.get(id);
  }

  /** A session's or volume's region; one no longer configured cannot be reached (its fleet is not known). */
  require(id: string): RegionFleet {
    const fleet = this.byId.get(id);
    if (!fleet) throw new Error(`region ${id} is not configured (REGIONS)`);
    return fleet;
  }
}

/** The use cases' dependencies for work in one region: its cloud, and its zone for new volumes and pools. */
export function inRegion<D extends Pick<SessionsDomainDeps, "regions" | "cloud" | "settings">>(
  deps: D,
  regionId: string,
): D {
  const fleet = deps.regions.require(regionId);
  return {
    ...deps,
    cloud: fleet.cloud,
    settings: { ...deps.settings, availabilityZone: fleet.availabilityZone },
  };
}

/** Where a start may run, as the request (or else the saved preference) says. */
export interface RegionChoice {
  region?: string;
  regions?: string[];
  maxRttMs?: number;
  rttMs?: Record<string, number>;
}

/**
 * The regions a start tries, in order: the `regions` list; one `region`; `auto`: the measured ones within the
 * bound, nearest first (configured order without measurements). No choice in the request: the preference, when it
 * names a region offered here (`auto`, or a region this deployment does not offer, means every region in order).
 */
export function regionsToTry(
  regions: RegionDirectory,
  choice: RegionChoice,
  preference: string | undefined,
  defaultMaxRttMs: number,
): string[] {
  const unknown = (field: string, id: string) =>
    AppError.validation(field, `${field} ${id} is not offered; available: ${regions.ids.join(", ")}`);
  if (choice.regions !== undefined && choice.region !== undefined) {
    throw AppError.validation("regions", "give region or regions, not both");
  }
  if (choice.regions !== undefined) {
    for (const id of choice.regions) if (!regions.get(id)) throw unknown("regions", id);
    return [...new Set(choice.regions)];
  }
  if ((choice.maxRttMs !== undefined || choice.rttMs !== undefined) && choice.region !== "auto") {
    throw AppError.validation(
      choice.maxRttMs !== undefined ? "maxRttMs" : "rttMs",
      'maxRttMs and rttMs go with region "auto"',
    );
  }
  if (choice.region === "auto") return nearest(regions, choice, defaultMaxRttMs);
  if (choice.region !== undefined) {
    if (!regions.get(choice.region)) throw unknown("region", choice.region);
    return [choice.region];
  }
  if (preference && preference !== "auto" && regions.get(preference)) return [preference];
  return regions.ids;
}

function nearest(regions: RegionDirectory, choice: RegionChoice, defaultMaxRttMs: number): string[] {
  if (!choice.rttMs) return regions.ids;
  const bound = choice.maxRttMs ?? defaultMaxRttMs;
  for (const id of Object.keys(choice.rttMs)) {
    if (!regions.get(id)) throw AppError.validation("rttMs", `rttMs names ${id}, which is not offered`);
  }
  const measured = regions.ids
    .filter((id) => choice.rttMs![id] !== undefined)
    .map((id) => ({ id, rtt: choice.rttMs![id]! }))
    .sort((a, b) => a.rtt - b.rtt);
  const within = measured.filter((m) => m.rtt <= bound);
  if (within.length === 0) {
    const best = measured[0];
    throw AppError.validation(
      "maxRttMs",
      best
        ? `No region is within maxRttMs ${bound} ms; the nearest measured is ${best.id} at ${Math.round(best.rtt)} ms`
        : "rttMs measured no region",
    );
  }
  return within.map((m) => m.id);
}

/** GET /api/v1/regions: every region with its beacon, whether a start finds capacity now, and its line. */
export async function listRegions(deps: Pick<SessionsDomainDeps, "db" | "regions" | "clock">): Promise<{
  items: { id: string; name: string; beaconUrl: string; available: boolean; queueLength: number }[];
}> {
  const [lengths, full] = await Promise.all([queueLengths(deps.db), regionsFull(deps.db, deps.clock.now())]);
  return {
    items: deps.regions.fleets.map((f) => {
      const queueLength = lengths.get(f.id) ?? 0;
      return {
        id: f.id,
        name: f.name,
        beaconUrl: f.beaconUrl,
        available: queueLength === 0 && !full.has(f.id),
        queueLength,
      };
    }),
  };
}
