import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { LockLostError, withFileLock } from "./file-lock";

export interface ProfileCredentials {
  /** The API origin signed in to: the tokens are sent there and nowhere else. */
  baseUrl: string;
  /**
   * The identity provider that issued the tokens, recorded at login: refreshes and revocation go there only.
   * Absent in profiles saved by an older cgs; those refresh at their access token's `iss` claim.
   */
  issuer?: string;
  accessToken: string;
  /** Absent when signed in with a bare access token (`cgs login --with-token`). */
  refreshToken?: string;
}

interface CredentialsFile {
  profiles: Record<string, ProfileCredentials>;
}

/** `$XDG_CONFIG_HOME/cgs`, default `~/.config/cgs`. */
export function configDir(env: NodeJS.ProcessEnv = process.env): string {
  const base =
    env.XDG_CONFIG_HOME && path.isAbsolute(env.XDG_CONFIG_HOME)
      ? env.XDG_CONFIG_HOME
      : path.join(os.homedir(), ".config");
  return path.join(base, "cgs");
}

/** The credentials file: one entry per profile, 0600 in a 0700 directory; every write is under a lock. */
export class CredentialsStore {
  readonly file: string;
  private readonly lockFile: string;

  constructor(readonly dir: string = configDir()) {
    this.file = path.join(dir, "credentials.json");
    this.lockFile = `${this.file}.lock`;
  }

  private readAll(): CredentialsFile {
    try {
      const parsed = JSON.parse(readFileSync(this.file, "utf8")) as Partial<CredentialsFile>;
      return { profiles: parsed.profiles ?? {} };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return { profiles: {} };
      throw new Error(`Cannot read ${this.file}: ${(err as Error).message}`);
    }
  }

  private writeAll(contents: CredentialsFile): void {
    // Written to a private temp file then renamed: a reader never sees half a file, nor a moment of 0644.
    const temp = `${this.file}.${process.pid}.tmp`;
    writeFileSync(temp, `${JSON.stringify(contents, null, 2)}\n`, { mode: 0o600 });
    chmodSync(temp, 0o600);
    renameSync(temp, this.file);
  }

  private ensureDir(): void {
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    chmodSync(this.dir, 0o700);
  }

  read(profile: string): ProfileCredentials | undefined {
    return this.readAll().profiles[profile];
  }

  /**
   * Holds the lock around `work`, which may read and replace the profile's entry; refused if the lock was taken
   * over meanwhile (work outlived the stale age), so a late writer never overwrites a newer pair.
   */
  async update<T>(
    profile: string,
    work: (
      current: ProfileCredentials | undefined,
    ) => Promise<{ next: ProfileCredentials | null; result: T }>,
  ): Promise<T> {
    this.ensureDir();
    return withFileLock(this.lockFile, async (lock) => {
      const all = this.readAll();
      const { next, result } = await work(all.profiles[profile]);
      if (!lock.held()) {
        throw new LockLostError(
          `Another cgs took over ${this.lockFile} while this one waited too long; nothing was written. Run the command again.`,
        );
      }
      if (next) all.profiles[profile] = next;
      else delete all.profiles[profile];
      this.writeAll(all);
      return result;
    });
  }
}
