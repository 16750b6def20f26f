import { randomBytes } from "node:crypto";

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

/** The private network the streaming client joins (Tailscale). */
export interface PrivateNetwork {
  /** A single-use, ephemeral, pre-authorized, tagged auth key. */
  createAuthKey(request: AuthKeyRequest): Promise<AuthKey>;
}

export interface TailscaleSettings {
  apiUrl: string;
  tailnet: string;
  apiKey: string;
  timeoutMs: number;
}

/** Tailscale API v2: POST /api/v2/tailnet/{tailnet}/keys. */
export class TailscalePrivateNetwork implements PrivateNetwork {
  constructor(private readonly settings: TailscaleSettings) {}

  async createAuthKey(request: AuthKeyRequest): Promise<AuthKey> {
    const url = `${this.settings.apiUrl}/api/v2/tailnet/${encodeURIComponent(this.settings.tailnet)}/keys`;
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

/** In-process stand-in: mints keys shaped like Tailscale's and remembers what was asked. */
export class SimulatedPrivateNetwork implements PrivateNetwork {
  readonly requests: AuthKeyRequest[] = [];

  createAuthKey(request: AuthKeyRequest): Promise<AuthKey> {
    this.requests.push(request);
    return Promise.resolve({
      key: `tskey-auth-${randomBytes(6).toString("hex")}-${randomBytes(16).toString("hex")}`,
      expiresAt: new Date(Date.now() + request.expirySeconds * 1000),
    });
  }
}
