import { randomBytes } from "node:crypto";
import { accountNetworkTag } from "@cgs/shared";

/** A player device's key (ephemeral: the device leaves when it logs out) or a streaming host's (it stays). */
export type KeyKind = "device" | "host";

export interface KeyRequest {
  accountId: string;
  kind: KeyKind;
  expirySeconds: number;
  /** Shown beside the key in the control plane (letters, digits and dashes). */
  description: string;
}

export interface AuthKey {
  /** The control plane's id of the key, to look it up or revoke it later. */
  id: string;
  /** The secret a node joins with: handed to the player or the host once, never stored. */
  key: string;
  expiresAt: Date;
  /** The network tag it carries, when the control plane scopes accounts by tag (hosted Tailscale's slot tag). */
  tag?: string;
}

/** A key recorded for an account, as an account purge hands it back. */
export interface AccountKeyRef {
  id: string;
  tag: string | null;
}

/** The account's player devices on the private network (streaming hosts are not counted). */
export interface DevicePresence {
  /** A device of the account is connected to the control plane now. */
  online: boolean;
  /** The latest time any of them was seen (now when one is online); null when none ever joined. */
  lastSeenAt: Date | null;
  devices: number;
}

/**
 * The private network the streaming client and the streaming host join (Headscale, hosted Tailscale, or the
 * in-process simulator). A key reaches only its own account's hosts, on the streaming ports; how each control
 * plane is told so is its adapter's business, and its policy never grows with the number of accounts.
 */
export interface PrivateNetwork {
  /** A single-use, pre-authorized key for one of the account's devices or hosts. */
  createKey(request: KeyRequest): Promise<AuthKey>;
  /** Of these keys (minted for the account and not expired), the ids a node has already joined with. */
  usedKeys(accountId: string, keyIds: readonly string[]): Promise<Set<string>>;
  /** Whether the account's player devices are online on the private network, and when one was last seen. */
  devicePresence(accountId: string): Promise<DevicePresence>;
  /**
   * The account's streaming hosts leave the network: a launch calls it before its host joins, because an account
   * plays one session at a time and a previous session's host would otherwise stay a (dead) peer of its devices.
   */
  removeHosts(accountId: string): Promise<void>;
  /** Removes every node of the account and revokes these keys of it; safe to repeat. */
  purgeAccount(accountId: string, keys: readonly AccountKeyRef[]): Promise<void>;
  /** What a node passes as `tailscale up --login-server`; undefined for hosted Tailscale (the client's default). */
  readonly loginServer?: string;
}

/** The private network's control plane answered something unexpected (or not at all); the request may be retried. */
export class PrivateNetworkError extends Error {}

/** One JSON call to a control plane's API with a bearer key and a timeout; 404 is answered as undefined when allowed. */
export async function controlPlaneCall<T>(
  name: string,
  url: string,
  init: { apiKey: string; timeoutMs: number; method?: string; body?: unknown; allow404?: boolean },
): Promise<T | undefined> {
  let res: Response;
  try {
    res = await fetch(url, {
      method: init.method ?? "GET",
      headers: {
        authorization: `Bearer ${init.apiKey}`,
        accept: "application/json",
        ...(init.body === undefined ? {} : { "content-type": "application/json" }),
      },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
      signal: AbortSignal.timeout(init.timeoutMs),
    });
  } catch (err) {
    throw new PrivateNetworkError(`${name} did not answer ${init.method ?? "GET"} ${new URL(url).pathname}`, {
      cause: err,
    });
  }
  const text = await res.text();
  if (res.status === 404 && init.allow404) return undefined;
  if (!res.ok) {
    throw new PrivateNetworkError(
      `${name} answered ${res.status} to ${init.method ?? "GET"} ${new URL(url).pathname}: ${text.slice(0, 200)}`,
    );
  }
  return (text ? JSON.parse(text) : {}) as T;
}

export interface SimulatedDevice {
  id: string;
  accountId: string;
  kind: KeyKind;
  online: boolean;
  lastSeenAt: Date;
}

/**
 * In-process stand-in with Headscale's semantics: every account is its own user, a key is single use and
 * expires, a device reaches a host only when both belong to the same account (`autogroup:self`), an ephemeral
 * device leaves when it logs out, and a purge removes the account's nodes and keys.
 */
export class SimulatedPrivateNetwork implements PrivateNetwork {
  readonly requests: KeyRequest[] = [];
  private readonly keys = new Map<
    string,
    { id: string; accountId: string; kind: KeyKind; expiresAt: Date; used: boolean }
  >();
  private readonly devices = new Map<string, SimulatedDevice>();

  /** hostTags: the tags the host at a private-network IP carries (the cloud simulator knows its account's tag). */
  constructor(private readonly hostTags: (hostIp: string) => string[] = () => []) {}

  createKey(request: KeyRequest): Promise<AuthKey> {
    this.requests.push(request);
    const id = `sim-${randomBytes(6).toString("hex")}`;
    const key = `tskey-auth-${id.slice(4)}-${randomBytes(16).toString("hex")}`;
    const expiresAt = new Date(Date.now() + request.expirySeconds * 1000);
    this.keys.set(key, { id, accountId: request.accountId, kind: request.kind, expiresAt, used: false });
    return Promise.resolve({ id, key, expiresAt });
  }

  usedKeys(accountId: string, keyIds: readonly string[]): Promise<Set<string>> {
    const wanted = new Set(keyIds);
    return Promise.resolve(
      new Set(
        [...this.keys.values()]
          .filter((k) => k.accountId === accountId && k.used && wanted.has(k.id))
          .map((k) => k.id),
      ),
    );
  }

  devicePresence(accountId: string): Promise<DevicePresence> {
    const mine = [...this.devices.values()].filter((d) => d.accountId === accountId && d.kind === "device");
    const lastSeen = Math.max(...mine.map((d) => (d.online ? Date.now() : d.lastSeenAt.getTime())));
    return Promise.resolve({
      online: mine.some((d) => d.online),
      lastSeenAt: mine.length > 0 ? new Date(lastSeen) : null,
      devices: mine.length,
    });
  }

  removeHosts(accountId: string): Promise<void> {
    for (const [id, device] of this.devices) {
      if (device.accountId === accountId && device.kind === "host") this.devices.delete(id);
    }
    return Promise.resolve();
  }

  purgeAccount(accountId: string, keys: readonly AccountKeyRef[]): Promise<void> {
    const revoked = new Set(keys.map((k) => k.id));
    for (const [key, entry] of this.keys) {
      if (entry.accountId === accountId && revoked.has(entry.id)) this.keys.delete(key);
    }
    for (const [id, device] of this.devices) if (device.accountId === accountId) this.devices.delete(id);
    return Promise.resolve();
  }

  /** A device joins with a key (single use, unexpired); it belongs to the key's account. */
  join(key: string): SimulatedDevice {
    const entry = this.keys.get(key);
    if (!entry || entry.used || entry.expiresAt.getTime() <= Date.now()) throw new Error("invalid auth key");
    entry.used = true;
    const device: SimulatedDevice = {
      id: `dev-${randomBytes(4).toString("hex")}`,
      accountId: entry.accountId,
      kind: entry.kind,
      online: true,
      lastSeenAt: new Date(),
    };
    this.devices.set(device.id, device);
    return device;
  }

  /** The device goes offline (it stays a member until it logs out). */
  disconnect(deviceId: string): void {
    const device = this.devices.get(deviceId);
    if (device) Object.assign(device, { online: false, lastSeenAt: new Date() });
  }

  /** `tailscale logout`: an ephemeral device (a player's) leaves the network at once. */
  logout(deviceId: string): void {
    const device = this.devices.get(deviceId);
    if (device?.kind === "device") this.devices.delete(deviceId);
    else this.disconnect(deviceId);
  }

  /** The policy: a device reaches a host only when both belong to the same account. */
  canReach(deviceId: string, hostIp: string): boolean {
    const device = this.devices.get(deviceId);
    if (!device) return false;
    return this.hostTags(hostIp).includes(accountNetworkTag(device.accountId));
  }
}
