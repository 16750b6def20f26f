import { accountNetworkName } from "@cgs/shared";
import {
  controlPlaneCall,
  type AccountKeyRef,
  type AuthKey,
  type DevicePresence,
  type KeyRequest,
  type PrivateNetwork,
} from "./private-network";

export interface HeadscaleSettings {
  /** Base URL of Headscale's REST API (`/api/v1/...`), as the sessions service reaches it. */
  apiUrl: string;
  apiKey: string;
  timeoutMs: number;
  /** Public URL nodes log in to (`tailscale up --login-server`); often the same host behind the ingress. */
  loginServer: string;
}

interface HeadscaleUser {
  id: string;
  name: string;
}

interface HeadscaleNode {
  id: string;
  online?: boolean;
  lastSeen?: string | null;
  preAuthKey?: { id?: string; ephemeral?: boolean } | null;
}

/**
 * Headscale 0.28's REST API (grpc-gateway over its gRPC service). Each account is one Headscale user named by a
 * digest of its id; its player devices and its streaming hosts are untagged nodes of that user, so the fixed
 * policy (`headscalePolicy`: `autogroup:member` → `autogroup:self` on the streaming ports) keeps every account
 * to itself. Nothing here ever writes the policy.
 */
export class HeadscalePrivateNetwork implements PrivateNetwork {
  /** Headscale user ids by name: a user is never deleted (see purgeAccount), so a cached id stays right. */
  private readonly userIds = new Map<string, string>();
  readonly loginServer: string;

  constructor(private readonly settings: HeadscaleSettings) {
    this.loginServer = settings.loginServer;
  }

  private call<T>(method: string, path: string, body?: unknown, allow404 = false): Promise<T | undefined> {
    return controlPlaneCall<T>("headscale", `${this.settings.apiUrl}${path}`, {
      apiKey: this.settings.apiKey,
      timeoutMs: this.settings.timeoutMs,
      method,
      body,
      allow404,
    });
  }

  private async findUser(name: string): Promise<string | undefined> {
    const cached = this.userIds.get(name);
    if (cached) return cached;
    const found = await this.call<{ users?: HeadscaleUser[] }>(
      "GET",
      `/api/v1/user?name=${encodeURIComponent(name)}`,
      undefined,
      true,
    );
    const id = found?.users?.find((u) => u.name === name)?.id;
    if (id) this.userIds.set(name, id);
    return id;
  }

  /**
   * The account's Headscale user (its place on the network), created on its first key; a concurrent creation by
   * another replica is read back. Returns the user's id.
   */
  async ensureAccount(accountId: string): Promise<string> {
    const name = accountNetworkName(accountId);
    const existing = await this.findUser(name);
    if (existing) return existing;
    try {
      const created = await this.call<{ user?: HeadscaleUser }>("POST", "/api/v1/user", { name });
      if (created?.user?.id) {
        this.userIds.set(name, created.user.id);
        return created.user.id;
      }
    } catch (err) {
      const raced = await this.findUser(name);
      if (raced) return raced;
      throw err;
    }
    const again = await this.findUser(name);
    if (!again) throw new Error(`headscale did not create user ${name}`);
    return again;
  }

  private async nodes(accountId: string): Promise<HeadscaleNode[]> {
    const name = accountNetworkName(accountId);
    if (!(await this.findUser(name))) return [];
    const body = await this.call<{ nodes?: HeadscaleNode[] }>(
      "GET",
      `/api/v1/node?user=${encodeURIComponent(name)}`,
    );
    return body?.nodes ?? [];
  }

  async createKey(request: KeyRequest): Promise<AuthKey> {
    const user = await this.ensureAccount(request.accountId);
    const body = await this.call<{ preAuthKey?: { id?: string; key?: string; expiration?: string } }>(
      "POST",
      "/api/v1/preauthkey",
      {
        user,
        reusable: false,
        // A player's device leaves when it logs out (or after Headscale's ephemeral inactivity timeout); a host stays.
        ephemeral: request.kind === "device",
        expiration: new Date(Date.now() + request.expirySeconds * 1000).toISOString(),
        // No tags: a tagged node belongs to no user, and autogroup:self would then admit nothing.
        aclTags: [],
      },
    );
    const key = body?.preAuthKey;
    if (!key?.id || !key.key || !key.expiration)
      throw new Error("headscale key response lacks id, key or expiration");
    return { id: key.id, key: key.key, expiresAt: new Date(key.expiration) };
  }

  /**
   * Headscale 0.28 lists keys only for the whole server, so a key counts as used when one of the account's nodes
   * joined with it. A device that joined and already left (logged out) takes its key's record with it: that key
   * still counts until it expires (at most VPN_KEY_TTL_SECONDS).
   */
  async usedKeys(accountId: string, keyIds: readonly string[]): Promise<Set<string>> {
    const wanted = new Set(keyIds);
    const joined = (await this.nodes(accountId))
      .map((n) => n.preAuthKey?.id)
      .filter((id) => id !== undefined);
    return new Set(joined.filter((id) => wanted.has(id)));
  }

  async devicePresence(accountId: string): Promise<DevicePresence> {
    const devices = (await this.nodes(accountId)).filter((n) => n.preAuthKey?.ephemeral === true);
    const online = devices.some((n) => n.online === true);
    const seen = devices
      .map((n) => (n.lastSeen ? new Date(n.lastSeen).getTime() : Number.NaN))
      .filter((t) => Number.isFinite(t) && t > 0);
    const lastSeenAt = online ? new Date() : seen.length > 0 ? new Date(Math.max(...seen)) : null;
    return { online, lastSeenAt, devices: devices.length };
  }

  async removeHosts(accountId: string): Promise<void> {
    for (const node of await this.nodes(accountId)) {
      if (node.preAuthKey?.ephemeral === true) continue;
      await this.call("DELETE", `/api/v1/node/${encodeURIComponent(node.id)}`, undefined, true);
    }
  }

  /**
   * Deletes the account's nodes and keys. The (now empty) user stays: Headscale 0.28's DeleteUser deletes every
   * pre-auth key of the server, not only the user's (fixed upstream after 0.28.0), and the user's name is a digest.
   */
  async purgeAccount(accountId: string, keys: readonly AccountKeyRef[]): Promise<void> {
    for (const node of await this.nodes(accountId)) {
      await this.call("DELETE", `/api/v1/node/${encodeURIComponent(node.id)}`, undefined, true);
    }
    for (const { id } of keys) {
      await this.call("DELETE", `/api/v1/preauthkey?id=${encodeURIComponent(id)}`, undefined, true);
    }
  }
}
