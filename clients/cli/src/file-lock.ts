import { randomUUID } from "node:crypto";
import { linkSync, readFileSync, statSync, unlinkSync, writeFileSync } from "node:fs";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface FileLockOptions {
  /** Give up waiting for the lock after this long. */
  timeoutMs?: number;
  /**
   * A lock older than this was left by a process that died (or hangs) and is taken over. Whoever holds the lock
   * must finish well within it: the CLI bounds its one network call (the refresh) far below.
   */
  staleMs?: number;
}

export interface HeldLock {
  /** Whether this process still owns the lock (false once another took it over as stale). */
  held(): boolean;
}

/** The lock was taken over while `work` ran: its result must not be written. */
export class LockLostError extends Error {}

interface Owner {
  token: string;
  ageMs: number;
}

/** The guard serialises removals of the lock file; a process holds it for a few system calls only. */
const GUARD_STALE_MS = 5_000;

const missing = (err: unknown) => (err as NodeJS.ErrnoException).code === "ENOENT";
const exists = (err: unknown) => (err as NodeJS.ErrnoException).code === "EEXIST";

/** Creates `path` holding `content`, atomically and only if it does not exist (a hard link of a private file). */
function createExclusive(path: string, content: string): boolean {
  const temp = `${path}.${randomUUID()}.tmp`;
  writeFileSync(temp, content, { mode: 0o600 });
  try {
    linkSync(temp, path);
    return true;
  } catch (err) {
    if (exists(err)) return false;
    throw err;
  } finally {
    unlinkSync(temp);
  }
}

function readOwner(path: string): Owner | undefined {
  let text: string;
  let mtimeMs: number;
  try {
    mtimeMs = statSync(path).mtimeMs;
    text = readFileSync(path, "utf8");
  } catch (err) {
    if (missing(err)) return undefined;
    throw err;
  }
  try {
    const parsed = JSON.parse(text) as { token?: unknown; at?: unknown };
    if (typeof parsed.token === "string" && typeof parsed.at === "number")
      return { token: parsed.token, ageMs: Date.now() - parsed.at };
  } catch {
    // a lock written by an older cgs (its pid only)
  }
  return { token: `unowned:${text}:${mtimeMs}`, ageMs: Date.now() - mtimeMs };
}

/**
 * Removes the lock file only if `token` still owns it. Creation needs no guard (it fails while the file exists),
 * so with every removal under the guard, nothing can replace the file between the check and the removal.
 * Returns false when the guard is busy (the caller retries).
 */
function removeIfOwnedBy(lockPath: string, token: string): boolean {
  const guard = `${lockPath}.guard`;
  if (!createExclusive(guard, String(Date.now()))) {
    // A guard left by a process that died between two system calls.
    const owner = readOwner(guard);
    if (owner && owner.ageMs > GUARD_STALE_MS) unlinkSync(guard);
    return false;
  }
  try {
    if (readOwner(lockPath)?.token === token) unlinkSync(lockPath);
    return true;
  } finally {
    unlinkSync(guard);
  }
}

/**
 * Runs `work` while holding an exclusive lock file. The file is created atomically with an owner token; only
 * its owner removes it; a lock older than `staleMs` is taken over atomically (a waiter removes it only if it is
 * still the stale one it saw). `work` can ask whether it still holds the lock before writing its result.
 */
export async function withFileLock<T>(
  lockPath: string,
  work: (lock: HeldLock) => Promise<T>,
  { timeoutMs = 30_000, staleMs = 60_000 }: FileLockOptions = {},
): Promise<T> {
  const token = randomUUID();
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (createExclusive(lockPath, JSON.stringify({ token, pid: process.pid, at: Date.now() }))) break;
    const owner = readOwner(lockPath);
    if (owner && owner.ageMs > staleMs) {
      if (!removeIfOwnedBy(lockPath, owner.token)) await sleep(25);
      continue;
    }
    if (Date.now() > deadline) throw new Error(`Timed out waiting for the lock ${lockPath}`);
    await sleep(25 + Math.random() * 50);
  }
  const lock: HeldLock = { held: () => readOwner(lockPath)?.token === token };
  try {
    return await work(lock);
  } finally {
    // Never another's: a lock taken over while work ran belongs to its new owner.
    for (let attempt = 0; attempt < 40 && !removeIfOwnedBy(lockPath, token); attempt += 1) await sleep(25);
  }
}
