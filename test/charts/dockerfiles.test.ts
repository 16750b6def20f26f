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

const DOCKERFILE = path.join(REPO_ROOT, "Dockerfile");
const ins = instructions(DOCKERFILE);
const stages = ins.filter((i) => i.op === "FROM");
const runtime = ins.slice(ins.lastIndexOf(stages[stages.length - 1] as { op: string; args: string }));
const manifests = ins.slice(0, ins.indexOf(stages[1] as { op: string; args: string }));

describe("the one Dockerfile", () => {
  it("when read, then it builds in separate stages on Node 24 LTS (bookworm-slim), parameterised by the service folder", () => {
    expect(stages.length).toBeGreaterThanOrEqual(3);
    expect(ins.find((i) => i.op === "ARG")?.args).toBe("NODE_IMAGE=node:24-bookworm-slim");
    expect(stages.every((s) => /^(\$\{NODE_IMAGE\}|manifests) AS \w+$/.test(s.args))).toBe(true);
    expect(ins.some((i) => i.op === "RUN" && i.args.includes('npx tsc -b host-agent "$SERVICE"'))).toBe(true);
    expect(runtime.some((i) => i.op === "ARG" && i.args === "SERVICE")).toBe(true);
  });

  it("when the build stage compiles the service, then the service's own folder was copied first, and the gateway's API reference is built", () => {
    const build = ins.slice(
      ins.indexOf(stages[1] as { op: string; args: string }),
      ins.lastIndexOf(stages[stages.length - 1] as { op: string; args: string }),
    );
    const copy = build.findIndex((i) => i.op === "COPY" && i.args === "${SERVICE}/ ${SERVICE}/");
    const compile = build.findIndex(
      (i) => i.op === "RUN" && i.args.includes('npx tsc -b host-agent "$SERVICE"'),
    );
    expect(copy).toBeGreaterThanOrEqual(0);
    expect(copy).toBeLessThan(compile);
    expect(build[compile]?.args).toContain(
      'if [ "$SERVICE" = gateway ]; then node gateway/scripts/build-api-reference.mjs; fi',
    );
  });

  it("when the workspaces are listed, then every workspace's package.json is copied before npm ci", () => {
    const workspaces = (
      JSON.parse(fs.readFileSync(path.join(REPO_ROOT, "package.json"), "utf8")) as { workspaces: string[] }
    ).workspaces;
    const copied = manifests.filter((i) => i.op === "COPY").map((i) => i.args);
    for (const ws of workspaces) expect(copied).toContain(`${ws}/package.json ${ws}/`);
  });

  it("when the runtime stage is read, then it installs production dependencies only and runs as the node user", () => {
    const installs = runtime.filter((i) => i.op === "RUN" && i.args.includes("npm ci"));
    expect(installs).toHaveLength(1);
    expect(installs[0]?.args).toContain("--omit=dev");
    expect(installs[0]?.args).toContain('--workspace "$SERVICE"');
    expect(runtime.filter((i) => i.op === "USER").map((i) => i.args)).toEqual(["node"]);
    expect(runtime.findIndex((i) => i.op === "USER")).toBeGreaterThan(
      runtime.findIndex((i) => i.op === "RUN"),
    );
    const copiedFromBuild = runtime.filter((i) => i.op === "COPY" && i.args.startsWith("--from=build"));
    expect(copiedFromBuild.map((i) => i.args.split(" ")[1])).toEqual([
      "/app/shared/dist",
      "/app/host-agent/dist",
      "/app/${SERVICE}/dist",
      "/app/${SERVICE}/drizzle",
    ]);
  });

  it("when started, then it preloads telemetry, listens on every interface and exposes its port", () => {
    expect(runtime.find((i) => i.op === "CMD")?.args).toBe(
      '["node", "--import", "@cgs/shared/dist/telemetry.js", "dist/main.js"]',
    );
    expect(runtime.find((i) => i.op === "WORKDIR")?.args).toBe("/app/${SERVICE}");
    expect(runtime.find((i) => i.op === "EXPOSE")?.args).toBe("${PORT}");
    expect(runtime.find((i) => i.op === "ENV")?.args).toMatch(/HOST=0\.0\.0\.0/);
  });

  it.each(Object.entries(DEPLOYABLES))(
    "when %s is built, then its folder is a workspace and its migrations (if it keeps a database) ship in the image",
    (_name, d) => {
      const workspaces = (
        JSON.parse(fs.readFileSync(path.join(REPO_ROOT, "package.json"), "utf8")) as { workspaces: string[] }
      ).workspaces;
      expect(workspaces).toContain(d.dir);
      expect(fs.existsSync(path.join(REPO_ROOT, d.dir, "drizzle"))).toBe(d.migrations);
      expect(fs.existsSync(path.join(REPO_ROOT, d.dir, "Dockerfile"))).toBe(false);
    },
  );

  it("when the release instructions are read, then they build every deployable from the one Dockerfile with its port", () => {
    const deploying = fs.readFileSync(path.join(REPO_ROOT, "docs", "deploying.md"), "utf8");
    for (const d of Object.values(DEPLOYABLES)) expect(deploying).toContain(`${d.dir}:${d.port}`);
    expect(deploying).toContain('--build-arg SERVICE="$svc" --build-arg PORT="$port"');
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
