import { createHash, randomBytes } from "node:crypto";

/** Prefix of the per-account tag every key and host of that account carries; the ACL lets a tag reach only itself. */
export const ACCOUNT_TAG_PREFIX = "tag:cgs-acct-";

/** The account's private-network tag: a digest, so the tailnet never learns account ids. */
export function accountNetworkTag(accountId: string): string {
  return `${ACCOUNT_TAG_PREFIX}${createHash("sha256").update(accountId).digest("hex").slice(0, 16)}`;
}

export interface AuthKeyRequest {
  /** ACL tags devices joined with the key get. */
  tags: string[];
  expirySeconds: number;
  description: string;
}

export interface AuthKey {
  key: string;
  expiresAt: Date;
}

export interface LiveKey {
  expiresAt: Date;
}

/** The private network the streaming client joins (Tailscale). */
export interface PrivateNetwork {
  /** A single-use, ephemeral, pre-authorized, tagged auth key. */
  createAuthKey(request: AuthKeyRequest): Promise<AuthKey>;
  /** Keys carrying this tag that are neither expired, revoked nor used up. */
  liveKeys(tag: string): Promise<LiveKey[]>;
}

export interface TailscaleSettings {
  apiUrl: string;
  tailnet: string;
  apiKey: string;
  timeoutMs: number;
}

/** Tailscale API v2: POST and GET /api/v2/tailnet/{tailnet}/keys. */
export class TailscalePrivateNetwork implements PrivateNetwork {
  constructor(private readonly settings: TailscaleSettings) {}

  private keysUrl(): string {
    return `${this.settings.apiUrl}/api/v2/tailnet/${encodeURIComponent(this.settings.tailnet)}/keys`;
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
      .map((k) => ({ expiresAt: new Date(k.expires!) }));
  }

  async createAuthKey(request: AuthKeyRequest): Promise<AuthKey> {
    const url = this.keysUrl();
    const res = await fetch(url, {
      method: "POST",
      headers: { authorization: `Bearer ${this.settings.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({
        capabilities: {
          devices: {
            create: { reusable: false, ephemeral: true, preauthorized: true, tags: request.tags },
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

  liveKeys(tag: string): Promise<LiveKey[]> {
    const now = Date.now();
    return Promise.resolve(
      [...this.keys.values()]
        .filter((k) => !k.used && k.expiresAt.getTime() > now && k.tags.includes(tag))
        .map((k) => ({ expiresAt: k.expiresAt })),
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

  /** The ACL: a device reaches a host only when they share an account tag. */
  canReach(deviceId: string, hostIp: string): boolean {
    const device = this.devices.get(deviceId);
    if (!device) return false;
    const host = this.hostTags(hostIp);
    return device.tags.some((t) => t.startsWith(ACCOUNT_TAG_PREFIX) && host.includes(t));
  }
}
