import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { parse } from "yaml";

// promtool comes with Debian's prometheus package (test/peers/peer.sh prometheus install; CI installs it).
const here = __dirname;
const rulesFile = path.resolve(here, "../../charts/cgs-platform/files/alerts.yaml");
const testsFile = path.join(here, "alerts.test.yaml");

interface RuleFile {
  groups: { rules: { alert?: string; annotations?: Record<string, string> }[] }[];
}
interface TestFile {
  tests: { alert_rule_test?: { alertname: string; exp_alerts: unknown[] }[] }[];
}

const rules = (parse(readFileSync(rulesFile, "utf8")) as RuleFile).groups.flatMap((g) => g.rules);
const tests = (parse(readFileSync(testsFile, "utf8")) as TestFile).tests.flatMap(
  (t) => t.alert_rule_test ?? [],
);
const runbooks = readFileSync(path.resolve(here, "../../docs/operations.md"), "utf8");

describe("the platform's alert rules", () => {
  it("when checked and unit-tested with promtool, then every rule is valid and every test passes", () => {
    execFileSync("promtool", ["check", "rules", rulesFile], { stdio: "pipe" });
    const out = execFileSync("promtool", ["test", "rules", testsFile], { encoding: "utf8", stdio: "pipe" });
    expect(out).toContain("SUCCESS");
  });

  it.each(rules.map((r) => r.alert ?? ""))(
    "when %s is unit-tested, then a test sees it fire and a test sees it stay quiet",
    (alert) => {
      const cases = tests.filter((t) => t.alertname === alert);
      expect(cases.some((t) => t.exp_alerts.length > 0)).toBe(true);
      expect(cases.some((t) => t.exp_alerts.length === 0)).toBe(true);
    },
  );

  it.each(rules.map((r) => [r.alert ?? "", r.annotations?.runbook ?? ""]))(
    "when %s fires, then its runbook link leads to its paragraph in docs/operations.md",
    (alert, runbook) => {
      expect(runbook).toBe(`docs/operations.md#${alert.toLowerCase()}`);
      expect(runbooks).toMatch(new RegExp(`^#+ .*${alert}`, "m"));
    },
  );
});
