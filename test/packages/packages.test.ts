import { execFileSync, spawnSync, type SpawnSyncReturns } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { uniqueEmail } from "@cgs/shared/testing/keycloak";
import { launchClientPlatform, localSession } from "../../clients/sdk/src/testing/client-platform";
import { repoRoot, type LaunchedPlatform } from "../platform/launch-platform";

// @cgs/sdk and @cgs/cli as a stranger gets them: `npm pack`ed, installed from the tarballs into an empty directory
// outside the repository (third-party dependencies from the registry), then used from a TypeScript consumer and a
// shell against `npm start` on ports 18780-18784. Run under `flock /tmp/cgs-platform.lock`.

const tsc = path.join(repoRoot, "node_modules", "typescript", "bin", "tsc");
// Child processes get the environment a person's shell would: no jest or npm-run leftovers.
const cleanEnv = (extra: Record<string, string> = {}): NodeJS.ProcessEnv => {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(
      ([key]) => !/^(npm_|NODE_OPTIONS$|JEST_|SERVICE_BASE_URL$)/i.test(key),
    ),
  );
  return { ...env, ...extra };
};
const run = (command: string, args: string[], cwd: string, extra: Record<string, string> = {}, input = "") =>
  spawnSync(command, args, { cwd, env: cleanEnv(extra), input, encoding: "utf8", timeout: 240_000 });
const explain = (r: SpawnSyncReturns<string>) => `exit ${r.status}\n${r.stdout}\n${r.stderr}`;

/** The first ```ts block of the SDK's README: the example a newcomer copies. */
function readmeExample(): string {
  const readme = readFileSync(path.join(repoRoot, "clients", "sdk", "README.md"), "utf8");
  const block = /```ts\n([\s\S]*?)```/.exec(readme)?.[1];
  if (!block) throw new Error("clients/sdk/README.md has no ts example");
  return block;
}
// What the example leaves to the reader's program.
const readerDeclarations = [
  "declare const accessToken: string;",
  "declare const refreshToken: string;",
  "declare const issuer: string;",
  "declare function save(pair: unknown): void;",
  "declare function log(...values: unknown[]): void;",
].join("\n");

let platform: LaunchedPlatform;
let packs: string;
let consumer: string;
let tarballs: string[];

beforeAll(async () => {
  packs = mkdtempSync(path.join(os.tmpdir(), "cgs-packs-"));
  consumer = mkdtempSync(path.join(os.tmpdir(), "cgs-consumer-"));
  const [launched] = await Promise.all([
    launchClientPlatform(18780),
    (async () => {
      execFileSync("npm", ["pack", "-w", "@cgs/sdk", "-w", "@cgs/cli", "--pack-destination", packs], {
        cwd: repoRoot,
        env: cleanEnv(),
        stdio: ["ignore", "ignore", "pipe"],
      });
      tarballs = readdirSync(packs).map((name) => path.join(packs, name));
      writeFileSync(path.join(consumer, "package.json"), JSON.stringify({ name: "consumer", private: true }));
      const install = run("npm", ["install", "--no-audit", "--no-fund", ...tarballs], consumer);
      if (install.status !== 0) throw new Error(`npm install of the tarballs failed: ${explain(install)}`);
    })(),
  ]);
  platform = launched;
}, 300_000);
afterAll(async () => {
  await platform?.cleanup();
  for (const dir of [packs, consumer]) if (dir) rmSync(dir, { recursive: true, force: true });
});

const tarballOf = (name: string) => {
  const file = tarballs.find((t) => path.basename(t).startsWith(name));
  if (!file) throw new Error(`no ${name} tarball in ${tarballs.join(", ")}`);
  return file;
};
const filesIn = (tarball: string) =>
  execFileSync("tar", ["-tzf", tarball], { encoding: "utf8" })
    .split("\n")
    .filter(Boolean)
    .map((f) => f.replace(/^package\//, ""));

describe("the packed tarballs", () => {
  test("when @cgs/sdk is packed, then it carries its compiled code and types and none of the repository's sources or tests", () => {
    const files = filesIn(tarballOf("cgs-sdk"));
    expect(files).toEqual(
      expect.arrayContaining(["package.json", "README.md", "dist/index.js", "dist/index.d.ts"]),
    );
    expect(files.filter((f) => !f.startsWith("dist/") && !["package.json", "README.md"].includes(f))).toEqual(
      [],
    );
    expect(files.filter((f) => /\.(ts|map)$/.test(f) && !f.endsWith(".d.ts"))).toEqual([]);
  });

  test("when @cgs/cli is packed, then it carries the cgs launcher and its compiled code", () => {
    const files = filesIn(tarballOf("cgs-cli"));
    expect(files).toEqual(
      expect.arrayContaining(["bin/cgs.js", "dist/main.js", "package.json", "README.md"]),
    );
    expect(files.filter((f) => f.includes("test") || f.startsWith("src/"))).toEqual([]);
  });

  test("when both are installed into an empty directory, then the CLI's @cgs/sdk is the packed one, not a registry package", () => {
    const lock = JSON.parse(readFileSync(path.join(consumer, "package-lock.json"), "utf8")) as {
      packages: Record<string, { resolved?: string; version?: string }>;
    };
    const sdkEntries = Object.entries(lock.packages).filter(([where]) =>
      where.endsWith("node_modules/@cgs/sdk"),
    );
    expect(sdkEntries).toHaveLength(1);
    expect(sdkEntries[0]![1].resolved).toMatch(/^file:.*cgs-sdk-0\.1\.0\.tgz$/);
  });
});

describe("@cgs/sdk in a TypeScript consumer", () => {
  test("when the README's example is compiled as ESM and as CommonJS, then TypeScript accepts both against the installed types", () => {
    const example = readmeExample();
    const [importLine, ...body] = example.split("\n");
    expect(importLine).toMatch(/from "@cgs\/sdk";$/);
    writeFileSync(path.join(consumer, "readme-example.mts"), `${readerDeclarations}\n${example}`);
    // CommonJS has no top-level await: the same lines inside an async function, compiled to require().
    writeFileSync(
      path.join(consumer, "readme-example.cts"),
      `${importLine}\n${readerDeclarations}\nexport async function example() {\n${body.join("\n")}\n  return ready;\n}\n`,
    );
    writeFileSync(
      path.join(consumer, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          module: "NodeNext",
          moduleResolution: "NodeNext",
          lib: ["ES2023", "DOM"],
          types: [],
          strict: true,
          noEmit: true,
        },
        files: ["readme-example.mts", "readme-example.cts"],
      }),
    );
    const checked = run(process.execPath, [tsc, "-p", "."], consumer);
    expect(checked.stdout + checked.stderr).toBe("");
    expect(checked.status).toBe(0);
  }, 120_000);

  test("when the installed SDK is loaded with import and with require, then both call the platform and read the signed-in identity", () => {
    const email = uniqueEmail("packed-sdk");
    const { accessToken } = localSession(email);
    const call = (loader: string) =>
      `${loader}.then(({ createClient }) => createClient({ baseUrl: process.env.BASE, apiKey: process.env.TOKEN })` +
      `.account.identity()).then((me) => console.log(me.email))`;
    const env = { BASE: platform.base, TOKEN: accessToken };
    const esm = run(
      process.execPath,
      ["--input-type=module", "-e", call(`import("@cgs/sdk")`)],
      consumer,
      env,
    );
    expect(esm.stdout.trim()).toBe(email);
    const cjs = run(
      process.execPath,
      ["--input-type=commonjs", "-e", call(`Promise.resolve(require("@cgs/sdk"))`)],
      consumer,
      env,
    );
    expect(cjs.stdout.trim()).toBe(email);
  }, 60_000);
});

describe("the installed cgs command", () => {
  const cgs = (args: string[], home: string, input = "") =>
    run(path.join(consumer, "node_modules", ".bin", "cgs"), args, consumer, { XDG_CONFIG_HOME: home }, input);

  test("when a person runs cgs --help, then it lists the commands and exits 0", () => {
    const help = cgs(["--help"], mkdtempSync(path.join(os.tmpdir(), "cgs-home-")));
    expect(help.status).toBe(0);
    for (const command of ["login", "logout", "whoami", "session", "credits", "settings", "account"]) {
      expect(help.stdout).toMatch(new RegExp(`^  ${command}\\b`, "m"));
    }
  });

  test("when a person signs in with cgs login --with-token, then the profile is saved and whoami names them", () => {
    const email = uniqueEmail("packed-cli");
    const home = mkdtempSync(path.join(os.tmpdir(), "cgs-home-"));
    const login = cgs(
      ["--base-url", platform.base, "login", "--with-token"],
      home,
      JSON.stringify(localSession(email)),
    );
    expect(login.status).toBe(0);
    const saved = JSON.parse(readFileSync(path.join(home, "cgs", "credentials.json"), "utf8")) as {
      profiles: Record<string, { baseUrl: string; refreshToken?: string }>;
    };
    expect(saved.profiles.default).toMatchObject({
      baseUrl: platform.base,
      refreshToken: expect.any(String),
    });
    const whoami = cgs(["whoami"], home);
    expect(explain(whoami)).toContain(email);
    expect(whoami.status).toBe(0);
  });
});
