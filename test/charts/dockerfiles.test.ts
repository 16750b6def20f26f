import * as fs from "node:fs";
import * as path from "node:path";

const REPO_ROOT = path.resolve(__dirname, "..", "..");
const DEPLOYABLES: Record<string, { dir: string; port: number; migrations: boolean }> = {
  gateway: { dir: "gateway", port: 8080, migrations: false },
  sessions: { dir: "services/sessions", port: 8101, migrations: true },
  billing: { dir: "services/billing", port: 8102, migrations: true },
  accounts: { dir: "services/accounts", port: 8103, migrations: true },
  "auth-proxy": { dir: "services/auth-proxy", port: 8104, migrations: true },
};

/** Instructions of a Dockerfile, continuation lines joined, comments dropped. */
function instructions(file: string): { op: string; args: string }[] {
  return fs
    .readFileSync(file, "utf8")
    .replace(/\\\n/g, " ")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#"))
    .map((l) => {
      const [op = "", ...rest] = l.split(/\s+/);
      return { op: op.toUpperCase(), args: rest.join(" ") };
    });
}

describe.each(Object.entries(DEPLOYABLES))("Dockerfile of %s", (name, d) => {
  const file = path.join(REPO_ROOT, d.dir, "Dockerfile");
  const ins = instructions(file);
  const stages = ins.filter((i) => i.op === "FROM");
  const runtimeStart = ins.lastIndexOf(stages[stages.length - 1] as { op: string; args: string });
  const runtime = ins.slice(runtimeStart);

  it("when read, then it builds in separate stages on node:20-bookworm-slim", () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    expect(ins.find((i) => i.op === "ARG")?.args).toBe("NODE_IMAGE=node:20-bookworm-slim");
    expect(stages.every((s) => /^(\$\{NODE_IMAGE\}|manifests) AS \w+$/.test(s.args))).toBe(true);
    expect(ins.some((i) => i.op === "RUN" && i.args.includes(`npx tsc -b ${d.dir}`))).toBe(true);
  });

  it("when the runtime stage is read, then it installs production dependencies only and runs as the node user", () => {
    const installs = runtime.filter((i) => i.op === "RUN" && i.args.includes("npm ci"));
    expect(installs).toHaveLength(1);
    expect(installs[0]?.args).toContain("--omit=dev");
    expect(runtime.filter((i) => i.op === "USER").map((i) => i.args)).toEqual(["node"]);
    expect(runtime.findIndex((i) => i.op === "USER")).toBeGreaterThan(
      runtime.findIndex((i) => i.op === "RUN"),
    );
    const copiedFromBuild = runtime.filter((i) => i.op === "COPY" && i.args.startsWith("--from=build"));
    expect(copiedFromBuild.map((i) => i.args.split(" ")[1])).toEqual([
      `/app/shared/dist`,
      `/app/${d.dir}/dist`,
    ]);
  });

  it("when started, then it preloads telemetry, listens on every interface and exposes its port", () => {
    expect(runtime.find((i) => i.op === "CMD")?.args).toBe(
      '["node", "--import", "@cgs/shared/dist/telemetry.js", "dist/main.js"]',
    );
    expect(runtime.find((i) => i.op === "WORKDIR" && i.args !== "/app")?.args).toBe(`/app/${d.dir}`);
    expect(runtime.find((i) => i.op === "EXPOSE")?.args).toBe(String(d.port));
    expect(runtime.find((i) => i.op === "ENV")?.args).toMatch(/HOST=0\.0\.0\.0/);
  });

  it("when the service keeps a database, then its migrations ship in the image", () => {
    const copiesMigrations = runtime.some(
      (i) => i.op === "COPY" && i.args === `${d.dir}/drizzle ${d.dir}/drizzle`,
    );
    expect(copiesMigrations).toBe(d.migrations);
    if (d.migrations) expect(fs.existsSync(path.join(REPO_ROOT, d.dir, "drizzle"))).toBe(true);
    void name;
  });
});

describe("the Docker build context", () => {
  it("when .dockerignore is read, then build outputs, dependencies and secrets stay out but manifests stay in", () => {
    const lines = fs.readFileSync(path.join(REPO_ROOT, ".dockerignore"), "utf8").split("\n");
    for (const entry of [
      "**/node_modules",
      "**/dist",
      ".env",
      ".git",
      "!infra/package.json",
      "!test/package.json",
    ]) {
      expect(lines).toContain(entry);
    }
  });
});
