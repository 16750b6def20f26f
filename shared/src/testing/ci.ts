/**
 * Whether this run is CI: the CI variable set to anything but "", "false" or "0" (CI systems set "true" or "1";
 * `.ci/run` sets "true"). In CI a missing peer fails the suite; it never skips.
 */
export function runningInCi(env: NodeJS.ProcessEnv = process.env): boolean {
  const value = env.CI?.trim().toLowerCase();
  return value !== undefined && value !== "" && value !== "false" && value !== "0";
}
