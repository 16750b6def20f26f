import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

const REPO_ROOT = path.resolve(__dirname, "..", "..");

/** The folders the rule covers: the gateway's src/ and every service's src/. */
function sourceRoots(repoRoot: string): string[] {
  const servicesDir = path.join(repoRoot, "services");
  const services = fs.existsSync(servicesDir)
    ? fs
        .readdirSync(servicesDir, { withFileTypes: true })
        .filter((entry) => entry.isDirectory())
        .map((entry) => path.posix.join("services", entry.name, "src"))
    : [];
  return ["gateway/src", ...services].filter((root) => fs.existsSync(path.join(repoRoot, root)));
}

/** Every `*.test.ts` under a folder, as paths relative to the repository. */
function testsUnder(repoRoot: string, dir: string): string[] {
  return fs.readdirSync(path.join(repoRoot, dir), { withFileTypes: true }).flatMap((entry) => {
    const relative = path.posix.join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === "node_modules" ? [] : testsUnder(repoRoot, relative);
    return entry.name.endsWith(".test.ts") ? [relative] : [];
  });
}

/**
 * The tests that break the layout, each with what to do: a test sits either at its src/'s root (a capability that
 * drives the service through its API or spans several modules, named after it) or beside the module of its name
 * (`domain/metering.test.ts` beside `domain/metering.ts`).
 */
function misplacedTests(repoRoot: string): { scanned: Map<string, number>; misplaced: string[] } {
  const scanned = new Map<string, number>();
  const misplaced: string[] = [];
  for (const root of sourceRoots(repoRoot)) {
    const tests = testsUnder(repoRoot, root);
    scanned.set(root, tests.length);
    for (const test of tests) {
      const dir = path.posix.dirname(test);
      const module = path.posix.join(dir, `${path.posix.basename(test, ".test.ts")}.ts`);
      if (dir === root || fs.existsSync(path.join(repoRoot, module))) continue;
      misplaced.push(
        `${test}: neither at ${root}/ nor beside ${path.posix.basename(module)}; move it to ${root}/ or beside the module it tests, named after it`,
      );
    }
  }
  return { scanned, misplaced: misplaced.sort() };
}

describe("one test layout for every service", () => {
  it("when a test sits in the gateway's or a service's src/, then it is at src/'s root or beside the module of its name", () => {
    const { scanned, misplaced } = misplacedTests(REPO_ROOT);
    // The walk found the repository: the gateway and every service have tests.
    expect(scanned.size).toBeGreaterThan(1);
    expect([...scanned].filter(([, count]) => count === 0)).toEqual([]);
    expect(misplaced).toEqual([]);
  });

  it("when a test sits in a folder without the module of its name, then the check names it", () => {
    const repo = fs.mkdtempSync(path.join(os.tmpdir(), "test-layout-"));
    try {
      const files = [
        "gateway/src/app.ts",
        "gateway/src/redis-outage.test.ts",
        "gateway/src/faults/upstream-outage.test.ts",
        "services/demo/src/demo-api.test.ts",
        "services/demo/src/domain/wallets.ts",
        "services/demo/src/domain/wallets.test.ts",
        "services/demo/src/domain/wallet-concurrency.test.ts",
        "services/demo/src/http/credits-routes.ts",
        "services/demo/src/http/credits-api.test.ts",
        "services/demo/src/node_modules/dep/dep.test.ts",
      ];
      for (const file of files) {
        fs.mkdirSync(path.join(repo, path.dirname(file)), { recursive: true });
        fs.writeFileSync(path.join(repo, file), "");
      }

      expect(misplacedTests(repo).misplaced).toEqual([
        "gateway/src/faults/upstream-outage.test.ts: neither at gateway/src/ nor beside upstream-outage.ts; move it to gateway/src/ or beside the module it tests, named after it",
        "services/demo/src/domain/wallet-concurrency.test.ts: neither at services/demo/src/ nor beside wallet-concurrency.ts; move it to services/demo/src/ or beside the module it tests, named after it",
        "services/demo/src/http/credits-api.test.ts: neither at services/demo/src/ nor beside credits-api.ts; move it to services/demo/src/ or beside the module it tests, named after it",
      ]);
    } finally {
      fs.rmSync(repo, { recursive: true, force: true });
    }
  });
});
