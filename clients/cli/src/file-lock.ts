import { openSync, closeSync, rmSync, statSync, writeSync } from "node:fs";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs `work` while holding an exclusive lock file (created with O_EXCL). A lock older than `staleMs` is left
 * by a process that died and is taken over.
 */
export async function withFileLock<T>(
  lockPath: string,
  work: () => Promise<T>,
  { timeoutMs = 30_000, staleMs = 60_000 } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const fd = openSync(lockPath, "wx", 0o600);
      writeSync(fd, String(process.pid));
      closeSync(fd);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      const age = (() => {
        try {
          return Date.now() - statSync(lockPath).mtimeMs;
        } catch {
          return 0;
        }
      })();
      if (age > staleMs) rmSync(lockPath, { force: true });
      else if (Date.now() > deadline) throw new Error(`Timed out waiting for the lock ${lockPath}`);
      else await sleep(25 + Math.random() * 50);
    }
  }
  try {
    return await work();
  } finally {
    rmSync(lockPath, { force: true });
  }
}
