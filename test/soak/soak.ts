// `npm run soak -- --players N --minutes M --seed S`: the platform under load and a seeded fault schedule, then
// the audit of its books; prints the table and writes it to bench/SOAK.md. Exits 1 on any violation.
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { repoRoot } from "../platform/launch-platform";
import { runSoak } from "./soak-run";

const { values } = parseArgs({
  options: {
    players: { type: "string", default: "8" },
    minutes: { type: "string", default: "5" },
    seed: { type: "string", default: String(Date.now() % 1_000_000) },
    out: { type: "string", default: path.join(repoRoot, "bench", "SOAK.md") },
  },
});
const number = (name: string, value: string) => {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) {
    process.stderr.write(`soak: --${name} must be a positive number, got "${value}"\n`);
    process.exit(2);
  }
  return n;
};

// The shared peers the platform and the audit use (each started only if not already running), and their env.
const peers = ["postgres", "redis", "moto", "stripe-mock", "keycloak"];
const up = spawnSync("bash", ["test/peers/up.sh", ...peers], { cwd: repoRoot, stdio: ["ignore", 2, 2] });
if (up.status !== 0) process.exit(2);
const env = spawnSync("bash", ["test/peers/up.sh", "--env", ...peers], { cwd: repoRoot, encoding: "utf8" });
for (const line of env.stdout.split("\n")) {
  const match = /^export ([A-Z0-9_]+)=(.*)$/.exec(line.trim());
  if (match && process.env[match[1]!] === undefined)
    process.env[match[1]!] = match[2]!.replace(/^["']|["']$/g, "");
}

runSoak({
  players: Math.round(number("players", values.players)),
  minutes: number("minutes", values.minutes),
  seed: Math.round(number("seed", values.seed)),
})
  .then((result) => {
    process.stdout.write(result.report);
    writeFileSync(values.out, result.report);
    process.stderr.write(`soak: ${result.violations} violations; written to ${values.out}\n`);
    process.exit(result.violations === 0 ? 0 : 1);
  })
  .catch((err: unknown) => {
    process.stderr.write(
      `soak: could not run: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exit(2);
  });
