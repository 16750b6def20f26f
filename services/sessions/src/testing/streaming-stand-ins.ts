import { startJsonServer, type HttpStandIn } from "./http-stand-in";

export interface TailscaleStandIn extends HttpStandIn {
  keys: Array<{ tailnet: string; body: unknown }>;
  /** The tailnet policy file (JSON) as last saved. */
  readonly policy: unknown;
  /** Policy reads to hold until this many are waiting, so concurrent writers all read the same ETag. */
  readBarrier: number;
}

/**
 * A Tailscale-API-shaped POST (create) and GET (list, ?all=true) /api/v2/tailnet/{tailnet}/keys, and GET and POST
 * /api/v2/tailnet/{tailnet}/acl with an ETag and If-Match (412 on a stale one), behind a bearer API key.
 */
export async function startTailscaleStandIn(options: {
  apiKey: string;
  policy?: unknown;
}): Promise<TailscaleStandIn> {
  const keys: Array<{ tailnet: string; body: unknown }> = [];
  const listed: unknown[] = [];
  const acl: { policy: unknown; version: number; readBarrier: number } = {
    policy: options.policy ?? { tagOwners: {}, acls: [] },
    version: 1,
    readBarrier: 0,
  };
  let waiting: Array<() => void> = [];
  const etag = () => `"v${acl.version}"`;
  const server = await startJsonServer(async (req) => {
    if (req.headers.authorization !== `Bearer ${options.apiKey}`)
      return { status: 401, body: { message: "unauthorized" } };
    if (/^\/api\/v2\/tailnet\/[^/]+\/acl$/.test(req.path)) {
      if (req.method === "GET") {
        if (acl.readBarrier > 1) {
          const released = new Promise<void>((resolve) => waiting.push(resolve));
          if (waiting.length >= acl.readBarrier) {
            acl.readBarrier = 0;
            waiting.forEach((resolve) => resolve());
            waiting = [];
          }
          await released;
        }
        return { status: 200, body: acl.policy, headers: { etag: etag() } };
      }
      if (req.method === "POST") {
        const ifMatch = req.headers["if-match"];
        if (ifMatch !== undefined && ifMatch !== etag())
          return { status: 412, body: { message: "precondition failed" } };
        acl.policy = req.body;
        acl.version += 1;
        return { status: 200, body: acl.policy, headers: { etag: etag() } };
      }
    }
    const match = /^\/api\/v2\/tailnet\/([^/]+)\/keys$/.exec(req.path);
    if (req.method === "GET" && match) return { status: 200, body: { keys: listed } };
    if (req.method !== "POST" || !match) return { status: 404, body: { message: "not found" } };
    const body = req.body as { expirySeconds?: number; capabilities?: unknown };
    keys.push({ tailnet: decodeURIComponent(match[1] ?? ""), body });
    const created = new Date();
    const expires = new Date(created.getTime() + (body.expirySeconds ?? 7776000) * 1000);
    const id = `k${keys.length}CNTRL`;
    const meta = {
      id,
      created: created.toISOString(),
      expires: expires.toISOString(),
      capabilities: body.capabilities,
    };
    listed.push(meta);
    return { status: 200, body: { ...meta, key: `tskey-auth-${id}-${"x".repeat(32)}` } };
  });
  return {
    ...server,
    keys,
    get policy() {
      return acl.policy;
    },
    get readBarrier() {
      return acl.readBarrier;
    },
    set readBarrier(n: number) {
      acl.readBarrier = n;
    },
  };
}
