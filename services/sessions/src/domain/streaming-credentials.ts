import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from "node:crypto";
import type { StreamingCredentialRepository } from "../data/streaming-credential-repository";

/** The basic-auth pair of one instance's Sunshine API. */
export interface StreamingCredentials {
  username: string;
  password: string;
}

/** Only for local runs and tests; production refuses to start without STREAMING_CREDENTIALS_KEY. */
export const LOCAL_STREAMING_CREDENTIALS_KEY = createHash("sha256")
  .update("cgs-local-streaming-credentials")
  .digest()
  .toString("base64");

/**
 * Generates, seals and opens per-instance streaming-host credentials. Each launch gets a fresh random pair;
 * the stored form is AES-256-GCM with the session id as associated data, so a sealed value copied to another
 * session's row does not open.
 */
export class StreamingCredentialVault {
  private readonly key: Buffer;

  constructor(
    private readonly repository: StreamingCredentialRepository,
    keyBase64: string,
  ) {
    this.key = Buffer.from(keyBase64, "base64");
    if (this.key.length !== 32) throw new Error("STREAMING_CREDENTIALS_KEY must be 32 bytes, base64");
  }

  /** The session's credentials, generated and stored on first call (idempotent per session, like the launch). */
  async issue(sessionId: string): Promise<StreamingCredentials> {
    const fresh = {
      username: `cgs-${randomBytes(4).toString("hex")}`,
      password: randomBytes(24).toString("base64url"),
    };
    const stored = await this.repository.insertOnce(sessionId, {
      username: fresh.username,
      sealedPassword: this.seal(sessionId, fresh.password),
    });
    return { username: stored.username, password: this.open(sessionId, stored.sealedPassword) };
  }

  /**
   * The key the session's host agent signs its reports with: derived from the vault key and the session id
   * (HKDF-SHA256), so it needs no storage, differs for every session, and only this service and that instance
   * hold it. Handed to the instance in its user data at launch.
   */
  agentKey(sessionId: string): Buffer {
    return Buffer.from(
      hkdfSync("sha256", this.key, Buffer.from(sessionId), "cgs host agent report key v1", 32),
    );
  }

  /**
   * A pool slot's key: a pre-booted instance's standby agent signs its reports with it, and the platform signs
   * the assignment it sends that instance with it. Derived like the agent keys, with another label.
   */
  poolKey(poolId: string): Buffer {
    return Buffer.from(hkdfSync("sha256", this.key, Buffer.from(poolId), "cgs pool slot key v1", 32));
  }

  /** Both keys, as the host-report intake looks them up. */
  readonly agentKeys = {
    session: (sessionId: string): Buffer => this.agentKey(sessionId),
    pool: (poolId: string): Buffer => this.poolKey(poolId),
  };

  async forSession(sessionId: string): Promise<StreamingCredentials | undefined> {
    const stored = await this.repository.find(sessionId);
    return stored && { username: stored.username, password: this.open(sessionId, stored.sealedPassword) };
  }

  private seal(sessionId: string, password: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", this.key, iv);
    cipher.setAAD(Buffer.from(sessionId));
    const body = Buffer.concat([cipher.update(password, "utf8"), cipher.final()]);
    return [
      "v1",
      iv.toString("base64url"),
      cipher.getAuthTag().toString("base64url"),
      body.toString("base64url"),
    ].join(".");
  }

  private open(sessionId: string, sealed: string): string {
    const [version, iv, tag, body] = sealed.split(".");
    if (version !== "v1" || !iv || !tag || body === undefined)
      throw new Error("unreadable sealed credential");
    const decipher = createDecipheriv("aes-256-gcm", this.key, Buffer.from(iv, "base64url"));
    decipher.setAAD(Buffer.from(sessionId));
    decipher.setAuthTag(Buffer.from(tag, "base64url"));
    return Buffer.concat([decipher.update(Buffer.from(body, "base64url")), decipher.final()]).toString(
      "utf8",
    );
  }
}
