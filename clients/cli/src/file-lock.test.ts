import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, utimesSync, writeFileSync, existsSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { withFileLock } from "./file-lock";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const lockIn = () => path.join(mkdtempSync(path.join(os.tmpdir(), "cgs-lock-")), "credentials.json.lock");

describe("the credentials lock", () => {
  test("when its owner outlives the stale age, then a waiter takes it over and the old owner's release leaves the new lock alone", async () => {
    const lock = lockIn();
    let releaseA!: () => void;
    let releaseB!: () => void;
    const a = withFileLock(
      lock,
      async (held) => {
        await new Promise<void>((r) => (releaseA = r));
        return held.held();
      },
      { staleMs: 200 },
    );
    await sleep(300);
    let bHeld = false;
    const b = withFileLock(
      lock,
      async (held) => {
        bHeld = held.held();
        await new Promise<void>((r) => (releaseB = r));
      },
      { staleMs: 200 },
    );
    while (!bHeld) await sleep(10);
    releaseA();
    // A learns it lost the lock (its caller then refuses to write), and its release removes nothing of B's.
    expect(await a).toBe(false);
    expect(existsSync(lock)).toBe(true);
    await expect(withFileLock(lock, async () => "C", { timeoutMs: 150, staleMs: 10_000 })).rejects.toThrow(
      "Timed out waiting for the lock",
    );
    releaseB();
    await b;
    expect(existsSync(lock)).toBe(false);
    await expect(withFileLock(lock, async () => "C")).resolves.toBe("C");
  });

  test("when several processes find the same stale lock, then one at a time holds it", async () => {
    const lock = lockIn();
    const log = `${lock}.log`;
    writeFileSync(lock, "12345");
    const old = new Date(Date.now() - 120_000);
    utimesSync(lock, old, old);
    const built = path.resolve(__dirname, "../dist/file-lock.js");
    const child = `
      const { appendFileSync } = require("node:fs");
      const { withFileLock } = require(${JSON.stringify(built)});
      withFileLock(${JSON.stringify(lock)}, async () => {
        appendFileSync(${JSON.stringify(log)}, "+" + process.pid + "\\n");
        await new Promise((r) => setTimeout(r, 30));
        appendFileSync(${JSON.stringify(log)}, "-" + process.pid + "\\n");
      }, { staleMs: 60_000, timeoutMs: 20_000 }).then(() => process.exit(0), (e) => { console.error(e); process.exit(1); });`;
    const codes = await Promise.all(
      Array.from(
        { length: 8 },
        () =>
          new Promise<number | null>((resolve) =>
            spawn(process.execPath, ["-e", child], { stdio: "inherit" }).on("exit", resolve),
          ),
      ),
    );
    expect(codes).toEqual(Array(8).fill(0));
    const lines = readFileSync(log, "utf8").trim().split("\n");
    expect(lines).toHaveLength(16);
    // Every entry is followed by the same process's exit: nobody else was inside meanwhile.
    for (let i = 0; i < lines.length; i += 2) expect(lines[i + 1]).toBe(`-${lines[i]!.slice(1)}`);
  }, 30_000);
});
