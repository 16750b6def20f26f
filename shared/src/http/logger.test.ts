import { spawn } from "node:child_process";
import { rmSync } from "node:fs";
import path from "node:path";
import { childBuildDir, transpileForChildren } from "../testing/child-build";
import { LOG_FLUSH_INTERVAL_MS } from "./logger";

const buildDir = childBuildDir("cgs-logger-test");
const loggerJs = path.join(buildDir, "http/logger.js");

/** A process that logs `lines` lines with createLogger, then idles, exits or throws. */
function runLogger(lines: number, then: "idle" | "exit" | "throw") {
  const script = `
    const { createLogger } = require(${JSON.stringify(loggerJs)});
    const logger = createLogger({ name: "logger-test" });
    for (let i = 0; i < ${lines}; i++) logger.info({ i }, "line");
    if (${JSON.stringify(then)} === "idle") setTimeout(() => {}, 30000);
    else if (${JSON.stringify(then)} === "exit") process.exit(0);
    else throw new Error("boom");`;
  const child = spawn(process.execPath, ["-e", script], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  const logged = () =>
    out
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { i: number; msg: string; service: string });
  return { child, exited, logged };
}

describe("createLogger", () => {
  beforeAll(() => transpileForChildren([path.join(__dirname, "logger.ts")], buildDir));
  afterAll(() => rmSync(buildDir, { recursive: true, force: true }));

  it("when a process logs a line and then idles, then the line reaches stdout while the process still runs", async () => {
    const run = runLogger(1, "idle");
    try {
      const deadline = Date.now() + 20 * LOG_FLUSH_INTERVAL_MS;
      while (run.logged().length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(run.child.exitCode).toBeNull();
      expect(run.logged()).toEqual([expect.objectContaining({ i: 0, msg: "line", service: "logger-test" })]);
    } finally {
      run.child.kill();
      await run.exited;
    }
  });

  it.each([
    ["exits", "exit", 0],
    ["crashes", "throw", 1],
  ] as const)(
    "when a process %s right after logging, then every line it logged reaches stdout, in order",
    async (_case, then, code) => {
      // Fewer bytes than one buffer, and many buffers' worth.
      for (const lines of [5, 2000]) {
        const run = runLogger(lines, then);
        expect(await run.exited).toBe(code);
        expect(run.logged().map((line) => line.i)).toEqual(Array.from({ length: lines }, (_, i) => i));
      }
    },
  );
});
