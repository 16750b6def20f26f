import { runningInCi } from "./ci";
import { describeWithKeycloak } from "./keycloak";
import { freePort } from "./ports";

describe("suites that need a peer", () => {
  test("when CI is set to true or 1, then the run is CI; unset, empty, false or 0 is not", () => {
    for (const value of ["true", "1", "yes", "TRUE"]) expect(runningInCi({ CI: value })).toBe(true);
    for (const value of [undefined, "", "false", "0"]) expect(runningInCi({ CI: value })).toBe(false);
  });

  test("when Keycloak does not answer in CI, then a Keycloak suite fails instead of skipping; elsewhere it skips", async () => {
    const nowhere = `http://127.0.0.1:${await freePort()}`;
    for (const CI of ["true", "1"]) {
      expect(() => describeWithKeycloak({ CI }, nowhere)).toThrow(/Keycloak is required in CI/);
    }
    const warn = jest.spyOn(console, "warn").mockImplementation(() => undefined);
    try {
      expect(describeWithKeycloak({}, nowhere)).toBe(describe.skip);
      expect(warn).toHaveBeenCalledWith(expect.stringContaining("SKIPPING: Keycloak does not answer"));
    } finally {
      warn.mockRestore();
    }
  });
});
