import type { CloudProvider } from "../adapters/cloud-provider";
import { RegionDirectory } from "../domain/regions";
import type { SessionsDomainDeps } from "../domain/session-deps";

/** The use cases' dependencies with the first region's fleet on `cloud` (a test's EC2 adapter or a faulty wrapper). */
export function onCloud(deps: SessionsDomainDeps, cloud: CloudProvider): SessionsDomainDeps {
  const [first, ...rest] = deps.regions.fleets;
  return { ...deps, cloud, regions: new RegionDirectory([{ ...first!, cloud }, ...rest]) };
}
