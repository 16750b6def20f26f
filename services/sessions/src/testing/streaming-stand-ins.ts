import { startJsonServer, type HttpStandIn } from "./http-stand-in";

export interface TailscaleStandInDevice {
  id: string;
  tags: string[];
  connectedToControl: boolean;
  lastSeen: string;
}

export interface TailscaleStandIn extends HttpStandIn {
  keys: Array<{ tailnet: string; body: unknown }>;
  /** The tailnet policy file (JSON) as last saved; the sessions service must never save it. */
  readonly policy: unknown;
  readonly devices: TailscaleStandInDevice[];
  /** A device joins with a key: single use, so the key turns `invalid`; the device carries the key's tags. */
  join(key: string): TailscaleStandInDevice;
}

/**
 * Hosted Tailscale cannot run here: a Tailscale-API-shaped stand-in for the adapter's tests (the real control
 * plane the private network is proven on is Headscale). POST /api/v2/tailnet/{t}/keys, GET and DELETE
 * .../keys/{id}, GET .../devices, DELETE /api/v2/device/{id}, and GET/POST .../acl, behind a bearer API key.
 */
export async function startTailscaleStandIn(options: {
  apiKey: string;
  policy?: unknown;
}): Promise<TailscaleStandIn> {
  const keys: Array<{ tailnet: string; body: unknown }> = [];
  const minted = new Map<
    string,
    { id: string; key: string; expires: string; tags: string[]; invalid: boolean; capabilities: unknown }
  >();
  const devices: TailscaleStandInDevice[] = [];
  const acl: { policy: unknown } = { policy: options.policy ?? { tagOwners: {}, acls: [] } };
  const server = await startJsonServer((req) => {
    if (req.headers.authorization !== `Bearer ${options.apiKey}`)
      return { status: 401, body: { message: "unauthorized" } };
    if (/^\/api\/v2\/tailnet\/[^/]+\/acl$/.test(req.path)) {
      if (req.method === "GET") return { status: 200, body: acl.policy, headers: { etag: '"v1"' } };
      if (req.method === "POST") {
        acl.policy = req.body;
        return { status: 200, body: acl.policy };
      }
    }
    if (req.method === "GET" && /^\/api\/v2\/tailnet\/[^/]+\/devices$/.test(req.path)) {
      return { status: 200, body: { devices } };
    }
    const device = /^\/api\/v2\/device\/([^/]+)$/.exec(req.path);
    if (req.method === "DELETE" && device) {
      const at = devices.findIndex((d) => d.id === decodeURIComponent(device[1]!));
      if (at < 0) return { status: 404, body: { message: "not found" } };
      devices.splice(at, 1);
      return { status: 200, body: {} };
    }
    const one = /^\/api\/v2\/tailnet\/[^/]+\/keys\/([^/]+)$/.exec(req.path);
    if (one) {
      const entry = [...minted.values()].find((k) => k.id === decodeURIComponent(one[1]!));
      if (!entry) return { status: 404, body: { message: "not found" } };
      if (req.method === "DELETE") {
        minted.delete(entry.key);
        return { status: 200, body: {} };
      }
      const { key: _secret, ...meta } = entry;
      return { status: 200, body: meta };
    }
    const match = /^\/api\/v2\/tailnet\/([^/]+)\/keys$/.exec(req.path);
    if (req.method !== "POST" || !match) return { status: 404, body: { message: "not found" } };
    const body = req.body as {
      expirySeconds?: number;
      capabilities?: { devices?: { create?: { tags?: string[] } } };
    };
    keys.push({ tailnet: decodeURIComponent(match[1] ?? ""), body });
    const created = new Date();
    const expires = new Date(created.getTime() + (body.expirySeconds ?? 7776000) * 1000).toISOString();
    const id = `k${keys.length}CNTRL`;
    const key = `tskey-auth-${id}-${"x".repeat(32)}`;
    const tags = body.capabilities?.devices?.create?.tags ?? [];
    minted.set(key, { id, key, expires, tags, invalid: false, capabilities: body.capabilities });
    return {
      status: 200,
      body: { id, key, created: created.toISOString(), expires, capabilities: body.capabilities },
    };
  });
  return {
    ...server,
    keys,
    devices,
    get policy() {
      return acl.policy;
    },
    join(key: string) {
      const entry = minted.get(key);
      if (!entry || entry.invalid || Date.parse(entry.expires) <= Date.now()) throw new Error("invalid key");
      entry.invalid = true;
      const joined = {
        id: `d${devices.length + 1}`,
        tags: entry.tags,
        connectedToControl: true,
        lastSeen: new Date().toISOString(),
      };
      devices.push(joined);
      return joined;
    },
  };
}
