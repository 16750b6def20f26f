import { randomBytes } from "node:crypto";
import { ACCOUNT_TAG_PREFIX, withAccountRules, type StreamingPorts, type TailnetPolicy } from "@cgs/shared";

export interface AuthKeyRequest {
  /** ACL tags devices joined with the key get. */
  tags: string[];
  expirySeconds: number;
  description: string;
  /** Devices joined with the key leave the tailnet when they go offline; false for streaming hosts. */
  ephemeral?: boolean;
}

export interface AuthKey {
  key: string;
  expiresAt: Date;
}

export interface LiveKey {
  expiresAt: Date;
  tags: string[];
}

/** The private network the streaming client joins (Tailscale). */
export interface PrivateNetwork {
  /** A single-use, pre-authorized, tagged auth key (ephemeral unless the request says otherwise). */
  createAuthKey(request: AuthKeyRequest): Promise<AuthKey>;
  /**
   * The tailnet policy owns this account tag and lets it reach itself on the streaming ports (Tailscale has no
   * wildcard tags, so each account's rule is added before its first key or host).
   */
  ensureAccountAccess(accountTag: string): Promise<void>;
  /** Keys carrying this tag that are neither expired, revoked nor used up. */
  liveKeys(tag: string): Promise<LiveKey[]>;
}

export interface TailscaleSettings {
  apiUrl: string;
  tailnet: string;
  apiKey: string;
  timeoutMs: number;
  /** Tag the API key owns; it becomes the owner of every account tag. */
  ownerTag: string;
  ports: StreamingPorts;
}

// Concurrent writers of the policy (replicas, other tools) make an If-Match fail; re-read and retry this often.
const POLICY_WRITE_ATTEMPTS = 5;

/** Tailscale API v2: POST and GET /api/v2/tailnet/{tailnet}/keys, GET and POST /api/v2/tailnet/{tailnet}/acl. */
export class TailscalePrivateNetwork implements PrivateNetwork {
  /** Account tags whose rules this process has seen in the policy; rules are never removed, so this stays true. */
  private readonly ensured = new Set<string>();

  constructor(private readonly settings: TailscaleSettings) {}

  private tailnetUrl(): string {
    return `${this.settings.apiUrl}/api/v2/tailnet/${encodeURIComponent(this.settings.tailnet)}`;
  }

  private keysUrl(): string {
    return `${this.tailnetUrl()}/keys`;
  }

  async ensureAccountAccess(accountTag: string): Promise<void> {
    if (this.ensured.has(accountTag)) return;
    const url = `${this.tailnetUrl()}/acl`;
    const auth = { authorization: `Bearer ${this.settings.apiKey}` };
    for (let attempt = 1; attempt <= POLICY_WRITE_ATTEMPTS; attempt += 1) {
      const read = await fetch(url, {
        headers: { ...auth, accept: "application/json" },
        signal: AbortSignal.timeout(this.settings.timeoutMs),
      });
      const text = await read.text();
      if (!read.ok) throw new Error(`tailscale answered ${read.status} to policy read`);
      const etag = read.headers.get("etag");
      const current = JSON.parse(text) as Partial<TailnetPolicy> & Record<string, unknown>;
      const next = withAccountRules(current, accountTag, this.settings.ownerTag, this.settings.ports);
      if (!next.changed) break;
      const write = await fetch(url, {
        method: "POST",
        headers: { ...auth, "content-type": "application/json", ...(etag ? { "if-match": etag } : {}) },
        body: JSON.stringify(next.policy),
        signal: AbortSignal.timeout(this.settings.timeoutMs),
      });
      await write.text();
      if (write.ok) break;
      if (write.status !== 412 || attempt === POLICY_WRITE_ATTEMPTS) {
        throw new Error(`tailscale answered ${write.status} to policy update`);
      }
    }
    this.ensured.add(accountTag);
  }

  async liveKeys(tag: string): Promise<LiveKey[]> {
    const res = await fetch(`${this.keysUrl()}?all=true`, {
      headers: { authorization: `Bearer ${this.settings.apiKey}` },
      signal: AbortSignal.timeout(this.settings.timeoutMs),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`tailscale answered ${res.status} to key listing`);
    const body = JSON.parse(text) as {
      keys?: Array<{
        expires?: string;
        revoked?: string;
        invalid?: boolean;
        capabilities?: { devices?: { create?: { tags?: string[] } } };
      }>;
    };
    const now = Date.now();
    return (body.keys ?? [])
      .filter(
        (k) =>
          !k.revoked &&
          !k.invalid &&
          typeof k.expires === "string" &&
          new Date(k.expires).getTime() > now &&
          (k.capabilities?.devices?.create?.tags ?? []).includes(tag),
      )
      .map((k) => ({ expiresAt: new Date(k.expires!), tags: k.capabilities?.devices?.create?.tags ?? [] }));
  }

  async createAuthKey(request: AuthKeyRequest): Promise<AuthKey> {
    const url = this.keysUrl();
    const res = await fetch(url, {
      method: "POST",
      headers: { authorization: `Bearer ${this.settings.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({
        capabilities: {
          devices: {
            create: {
              reusable: false,
              ephemeral: request.ephemeral ?? true,
              preauthorized: true,
              tags: request.tags,
            },
          },
        },
        expirySeconds: request.expirySeconds,
        description: request.description,
      }),
      signal: AbortSignal.timeout(this.settings.timeoutMs),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`tailscale answered ${res.status} to key creation`);
    const body = JSON.parse(text) as { key?: unknown; expires?: unknown };
    if (typeof body.key !== "string" || typeof body.expires !== "string") {
      throw new Error("tailscale key response lacks key or expires");
    }
    return { key: body.key, expiresAt: new Date(body.expires) };
  }
}

export interface SimulatedDevice {
  id: string;
  tags: string[];
}

/**
 * In-process stand-in: mints single-use keys shaped like Tailscale's, lets a device join with one, and enforces
 * the ACL infra generates for the tailnet: a device reaches a host only when both carry the same account tag.
 */
export class SimulatedPrivateNetwork implements PrivateNetwork {
  readonly requests: AuthKeyRequest[] = [];
  /** Account tags whose rules the simulated policy holds; without its rule a tag reaches nothing (default deny). */
  readonly accountRules = new Set<string>();
  private readonly keys = new Map<string, { tags: string[]; expiresAt: Date; used: boolean }>();
  private readonly devices = new Map<string, SimulatedDevice>();

  /** hostTags: the tags the host at a private-network IP joined with (the cloud simulator knows its account). */
  constructor(private readonly hostTags: (hostIp: string) => string[] = () => []) {}

  createAuthKey(request: AuthKeyRequest): Promise<AuthKey> {
    this.requests.push(request);
    const key = `tskey-auth-${randomBytes(6).toString("hex")}-${randomBytes(16).toString("hex")}`;
    const expiresAt = new Date(Date.now() + request.expirySeconds * 1000);
    this.keys.set(key, { tags: [...request.tags], expiresAt, used: false });
    return Promise.resolve({ key, expiresAt });
  }

  ensureAccountAccess(accountTag: string): Promise<void> {
    this.accountRules.add(accountTag);
    return Promise.resolve();
  }

  liveKeys(tag: string): Promise<LiveKey[]> {
    const now = Date.now();
    return Promise.resolve(
      [...this.keys.values()]
        .filter((k) => !k.used && k.expiresAt.getTime() > now && k.tags.includes(tag))
        .map((k) => ({ expiresAt: k.expiresAt, tags: [...k.tags] })),
    );
  }

  /** A device joins with a key (single use, unexpired); it carries the key's tags. */
  join(key: string): SimulatedDevice {
    const entry = this.keys.get(key);
    if (!entry || entry.used || entry.expiresAt.getTime() <= Date.now()) throw new Error("invalid auth key");
    entry.used = true;
    const device = { id: `dev-${randomBytes(4).toString("hex")}`, tags: entry.tags };
    this.devices.set(device.id, device);
    return device;
  }

  /** The ACL: a device reaches a host only when they share an account tag whose rule is in the policy. */
  canReach(deviceId: string, hostIp: string): boolean {
    const device = this.devices.get(deviceId);
    if (!device) return false;
    const host = this.hostTags(hostIp);
    return device.tags.some(
      (t) => t.startsWith(ACCOUNT_TAG_PREFIX) && this.accountRules.has(t) && host.includes(t),
    );
  }
}
