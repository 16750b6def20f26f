import { slotTag } from "@cgs/shared";
import { CloudCapacityError } from "./cloud-provider";
import {
  controlPlaneCall,
  type AccountKeyRef,
  type AuthKey,
  type DevicePresence,
  type KeyRequest,
  type PrivateNetwork,
} from "./private-network";

/** A slot taken from an account that no longer plays: its devices and keys leave the tailnet before reuse. */
export interface ReclaimedSlot {
  slot: number;
  previousAccountId: string;
  previousKeyIds: string[];
}

/** Where the slot each playing account holds is leased (the sessions database). */
export interface SlotLeases {
  /** The account's slot, leasing one (after `clear` emptied a reclaimed one); undefined when all are in play. */
  lease(accountId: string, clear: (reclaimed: ReclaimedSlot) => Promise<void>): Promise<number | undefined>;
  find(accountId: string): Promise<number | undefined>;
}

export interface TailscaleSettings {
  apiUrl: string;
  tailnet: string;
  apiKey: string;
  timeoutMs: number;
  /** Tags of every player device's key (beside its slot tag). */
  deviceTags: readonly string[];
  /** Tag of every streaming host's key (beside its slot tag). */
  hostTag: string;
  /** How long one device listing answers presence questions for every account, in ms. */
  devicesCacheMs: number;
}

interface TailscaleDevice {
  id: string;
  tags?: string[];
  connectedToControl?: boolean;
  lastSeen?: string;
}

/**
 * Tailscale API v2. Hosted Tailscale cannot give each account its own user, so isolation comes from the fixed
 * policy infra writes (`tailnetPolicy`): each playing account leases one slot tag, and its keys carry it. The
 * adapter never writes the policy; a slot is reused only after the previous holder's devices and keys are gone.
 */
export class TailscalePrivateNetwork implements PrivateNetwork {
  private devicesCache: { at: number; devices: Promise<TailscaleDevice[]> } | undefined;

  constructor(
    private readonly settings: TailscaleSettings,
    private readonly slots: SlotLeases,
  ) {}

  private url(path: string): string {
    return `${this.settings.apiUrl}/api/v2${path}`;
  }

  private tailnetPath(path: string): string {
    return `/tailnet/${encodeURIComponent(this.settings.tailnet)}${path}`;
  }

  private call<T>(method: string, path: string, body?: unknown, allow404 = false): Promise<T | undefined> {
    return controlPlaneCall<T>("tailscale", this.url(path), {
      apiKey: this.settings.apiKey,
      timeoutMs: this.settings.timeoutMs,
      method,
      body,
      allow404,
    });
  }

  async createKey(request: KeyRequest): Promise<AuthKey> {
    const slot = await this.slots.lease(request.accountId, (reclaimed) =>
      this.clear(reclaimed.previousKeyIds, new Set([slotTag(reclaimed.slot)])),
    );
    if (slot === undefined) {
      throw new CloudCapacityError(
        "every private-network slot is held by an account that is playing",
        "PrivateNetworkSlotsExhausted",
      );
    }
    const tags =
      request.kind === "device"
        ? [...this.settings.deviceTags, slotTag(slot)]
        : [this.settings.hostTag, slotTag(slot)];
    const body = await this.call<{ id?: string; key?: string; expires?: string }>(
      "POST",
      this.tailnetPath("/keys"),
      {
        capabilities: {
          devices: {
            create: { reusable: false, ephemeral: request.kind === "device", preauthorized: true, tags },
          },
        },
        expirySeconds: request.expirySeconds,
        description: request.description,
      },
    );
    if (!body?.id || !body.key || !body.expires)
      throw new Error("tailscale key response lacks id, key or expires");
    return { id: body.id, key: body.key, expiresAt: new Date(body.expires), tag: slotTag(slot) };
  }

  /** One GET per key (at most VPN_KEY_MAX_LIVE): a used single-use key answers `invalid`, a deleted one 404. */
  async usedKeys(_accountId: string, keyIds: readonly string[]): Promise<Set<string>> {
    const used = new Set<string>();
    for (const id of keyIds) {
      const key = await this.call<{ invalid?: boolean; revoked?: string }>(
        "GET",
        this.tailnetPath(`/keys/${encodeURIComponent(id)}`),
        undefined,
        true,
      );
      if (!key || key.invalid === true || key.revoked) used.add(id);
    }
    return used;
  }

  /** The tailnet's devices, listed at most once per `devicesCacheMs` for every account's presence question. */
  private devices(fresh = false): Promise<TailscaleDevice[]> {
    const now = Date.now();
    if (fresh || !this.devicesCache || now - this.devicesCache.at > this.settings.devicesCacheMs) {
      const devices = this.call<{ devices?: TailscaleDevice[] }>("GET", this.tailnetPath("/devices")).then(
        (b) => b?.devices ?? [],
      );
      this.devicesCache = { at: now, devices };
      devices.catch(() => (this.devicesCache = undefined));
    }
    return this.devicesCache!.devices;
  }

  private async taggedDevices(tag: string, fresh = false): Promise<TailscaleDevice[]> {
    return (await this.devices(fresh)).filter((d) => d.tags?.includes(tag));
  }

  async devicePresence(accountId: string): Promise<DevicePresence> {
    const slot = await this.slots.find(accountId);
    if (slot === undefined) return { online: false, lastSeenAt: null, devices: 0 };
    const devices = (await this.taggedDevices(slotTag(slot))).filter((d) =>
      this.settings.deviceTags.every((t) => d.tags?.includes(t)),
    );
    const online = devices.some((d) => d.connectedToControl === true);
    const seen = devices
      .map((d) => (d.lastSeen ? Date.parse(d.lastSeen) : Number.NaN))
      .filter(Number.isFinite);
    const lastSeenAt = online ? new Date() : seen.length > 0 ? new Date(Math.max(...seen)) : null;
    return { online, lastSeenAt, devices: devices.length };
  }

  async removeHosts(accountId: string): Promise<void> {
    const slot = await this.slots.find(accountId);
    if (slot === undefined) return;
    const hosts = (await this.taggedDevices(slotTag(slot), true)).filter((d) =>
      d.tags?.includes(this.settings.hostTag),
    );
    for (const device of hosts) {
      await this.call("DELETE", `/device/${encodeURIComponent(device.id)}`, undefined, true);
    }
  }

  /** Deletes these keys and every device carrying one of these tags (a slot's previous holder, a purged account). */
  private async clear(keyIds: readonly string[], tags: ReadonlySet<string>): Promise<void> {
    for (const id of keyIds) {
      await this.call("DELETE", this.tailnetPath(`/keys/${encodeURIComponent(id)}`), undefined, true);
    }
    if (tags.size === 0) return;
    const devices = (await this.devices(true)).filter((d) => d.tags?.some((t) => tags.has(t)));
    for (const device of devices) {
      await this.call("DELETE", `/device/${encodeURIComponent(device.id)}`, undefined, true);
    }
  }

  /**
   * Runs inside the purge's database transaction, so it reads no lease: the recorded keys name their slot tags.
   * The slot itself is reclaimed by the next account that needs one (its holder no longer plays).
   */
  async purgeAccount(_accountId: string, keys: readonly AccountKeyRef[]): Promise<void> {
    const tags = new Set(keys.map((k) => k.tag).filter((t): t is string => t !== null));
    await this.clear(
      keys.map((k) => k.id),
      tags,
    );
  }
}
