import { randomUUID } from "node:crypto";
import { normalizeFingerprint } from "@cgs/host-agent";
import { HostIdentityError, pinnedHttpsRequest, type HostReply } from "./pinned-https";

export { HostIdentityError } from "./pinned-https";
import type { StreamingCredentials } from "../domain/streaming-credentials";

/** The streaming server on a session's instance (Sunshine): readiness and pairing, with that instance's own credentials. */
export interface StreamingHost {
  /** True when the session's host at this address answers its API. */
  isReady(hostIp: string, sessionId: string): Promise<boolean>;
  /** Hands a pairing PIN to the host (Sunshine's POST /api/pin). Throws when the host does not accept it. */
  submitPin(hostIp: string, sessionId: string, pin: string, clientName: string): Promise<void>;
  /** The streaming clients paired with the host (Sunshine's GET /api/clients/list). */
  listClients(hostIp: string, sessionId: string): Promise<HostClient[]>;
  /** Unpairs one client (Sunshine's POST /api/clients/unpair); succeeds when it is not paired (any more). */
  unpairClient(hostIp: string, sessionId: string, clientId: string): Promise<void>;
}

/** A streaming client paired with the host: Sunshine's uuid of its certificate and the name it paired with. */
export interface HostClient {
  id: string;
  name: string;
}

/** The session's own streaming-host credentials (undefined when none were issued). */
export type CredentialLookup = (sessionId: string) => Promise<StreamingCredentials | undefined>;

/**
 * The SHA-256 fingerprint of the TLS certificate the session's host serves, as its host agent reported it
 * (hex, with or without colons); undefined while none is known.
 */
export type FingerprintLookup = (sessionId: string) => Promise<string | undefined>;

export interface SunshineSettings {
  /** Base URL with `{ip}` in place of the host address, e.g. https://{ip}:47990. */
  urlTemplate: string;
  credentials: CredentialLookup;
  fingerprint: FingerprintLookup;
  timeoutMs: number;
}

/**
 * Sunshine's web API over HTTPS with basic auth: each instance's own pair, never a shared one. Sunshine serves a
 * self-signed certificate, so certificate-chain verification is replaced by pinning: the TLS handshake must present
 * the certificate whose SHA-256 fingerprint the session's host agent reported, checked before a byte of the request
 * (its credentials) is written. With no fingerprint known the call is refused, never sent unpinned.
 */
export class SunshineStreamingHost implements StreamingHost {
  constructor(private readonly settings: SunshineSettings) {
    if (!settings.urlTemplate.startsWith("https://")) {
      throw new Error("STREAMING_HOST_URL_TEMPLATE must be an https:// URL: every Sunshine call is pinned");
    }
  }

  private url(hostIp: string, path: string): URL {
    return new URL(this.settings.urlTemplate.replace("{ip}", hostIp).replace(/\/+$/, "") + path);
  }

  private async request(
    hostIp: string,
    sessionId: string,
    method: "GET" | "POST",
    path: string,
    body?: unknown,
  ): Promise<HostReply> {
    const pinned = normalizeFingerprint(await this.settings.fingerprint(sessionId));
    if (!pinned)
      throw new HostIdentityError(`no host certificate fingerprint known for session ${sessionId}`);
    const credentials = await this.settings.credentials(sessionId);
    if (!credentials) throw new Error(`no streaming-host credentials for session ${sessionId}`);
    const basic = Buffer.from(`${credentials.username}:${credentials.password}`).toString("base64");
    return pinnedHttpsRequest({
      url: this.url(hostIp, path),
      method,
      headers: { authorization: `Basic ${basic}` },
      body: body === undefined ? undefined : JSON.stringify(body),
      pinned,
      timeoutMs: this.settings.timeoutMs,
      describe: `host ${hostIp} (session ${sessionId})`,
    });
  }

  async isReady(hostIp: string, sessionId: string): Promise<boolean> {
    try {
      const res = await this.request(hostIp, sessionId, "GET", "/api/apps");
      return res.status >= 200 && res.status < 300;
    } catch {
      return false;
    }
  }

  async submitPin(hostIp: string, sessionId: string, pin: string, clientName: string): Promise<void> {
    const res = await this.request(hostIp, sessionId, "POST", "/api/pin", { pin, name: clientName });
    if (res.status < 200 || res.status >= 300)
      throw new Error(`streaming host answered ${res.status} to /api/pin`);
    // Sunshine answers 200 {"status": "true"|"false"}; "false" means no client is waiting for a PIN.
    let status: unknown;
    try {
      status = (JSON.parse(res.text) as { status?: unknown }).status;
    } catch {
      status = undefined;
    }
    if (status === false || status === "false") throw new Error("streaming host did not accept the PIN");
  }

  async listClients(hostIp: string, sessionId: string): Promise<HostClient[]> {
    const res = await this.request(hostIp, sessionId, "GET", "/api/clients/list");
    if (res.status < 200 || res.status >= 300)
      throw new Error(`streaming host answered ${res.status} to /api/clients/list`);
    // Sunshine answers {"named_certs": [{"name": ..., "uuid": ...}], "status": true}.
    const body = JSON.parse(res.text) as { named_certs?: { name?: unknown; uuid?: unknown }[] };
    return (body.named_certs ?? []).flatMap((c) =>
      typeof c.uuid === "string" && c.uuid
        ? [{ id: c.uuid, name: typeof c.name === "string" ? c.name : "" }]
        : [],
    );
  }

  async unpairClient(hostIp: string, sessionId: string, clientId: string): Promise<void> {
    const res = await this.request(hostIp, sessionId, "POST", "/api/clients/unpair", { uuid: clientId });
    if (res.status < 200 || res.status >= 300)
      throw new Error(`streaming host answered ${res.status} to /api/clients/unpair`);
  }
}

export interface SimulatedStreamingHostSettings {
  readyDelayMs: number;
  now?: () => number;
  /** The credentials the sessions service presents for a session (its vault); unset = no check. */
  credentials?: CredentialLookup;
  /** The credentials installed on the host at this address at launch (the cloud simulator's record). */
  installed?: (hostIp: string) => StreamingCredentials | undefined;
  /** Sunshine's client list as the host at this address keeps it: on its account volume (the cloud simulator's). */
  clientsOf?: (hostIp: string) => HostClient[] | undefined;
  /** Whether the host at this address sees its account volume yet (Sunshine starts only once it does). */
  volumeReady?: (hostIp: string) => boolean;
}

/**
 * In-process stand-in for `npm start` and tests: a host answers `readyDelayMs` after it was first probed with its
 * account volume attached (or after a pool instance's assignment restarted it),
 * and records the PINs it was given. `down()` makes a host refuse everything. Like Sunshine, a host refuses
 * (401) credentials other than the ones installed on it at launch.
 */
export class SimulatedStreamingHost implements StreamingHost {
  private readonly firstSeen = new Map<string, number>();
  private readonly downHosts = new Set<string>();
  readonly pins = new Map<string, { pin: string; name: string }>();
  probes = 0;

  constructor(private readonly settings: SimulatedStreamingHostSettings) {}

  /** Whether the credentials presented for this session are the ones installed on the host at hostIp. */
  async accepts(hostIp: string, sessionId: string): Promise<boolean> {
    const { credentials, installed } = this.settings;
    if (!credentials || !installed) return true;
    const presented = await credentials(sessionId);
    const expected = installed(hostIp);
    return (
      presented !== undefined &&
      expected !== undefined &&
      presented.username === expected.username &&
      presented.password === expected.password
    );
  }

  private now(): number {
    return (this.settings.now ?? Date.now)();
  }

  setReadyDelay(ms: number): void {
    this.settings.readyDelayMs = ms;
  }

  down(hostIp: string, isDown = true): void {
    if (isDown) this.downHosts.add(hostIp);
    else this.downHosts.delete(hostIp);
  }

  /** Sunshine (re)starts on the host at this address now: a pool instance took its session. */
  restart(hostIp: string): void {
    this.firstSeen.set(hostIp, this.now());
  }

  /** Whether the host at this address answers at all (its agent's Sunshine probe). */
  answers(hostIp: string): boolean {
    if (this.downHosts.has(hostIp)) return false;
    if (this.settings.volumeReady && !this.settings.volumeReady(hostIp)) {
      this.firstSeen.delete(hostIp);
      return false;
    }
    const first = this.firstSeen.get(hostIp) ?? this.now();
    this.firstSeen.set(hostIp, first);
    return this.now() - first >= this.settings.readyDelayMs;
  }

  async isReady(hostIp: string, sessionId: string): Promise<boolean> {
    this.probes += 1;
    return this.answers(hostIp) && (await this.accepts(hostIp, sessionId));
  }

  private async reachable(hostIp: string, sessionId: string, path: string): Promise<void> {
    if (!this.answers(hostIp)) throw new Error(`streaming host ${hostIp} is not answering`);
    if (!(await this.accepts(hostIp, sessionId))) throw new Error(`streaming host answered 401 to ${path}`);
  }

  async submitPin(hostIp: string, sessionId: string, pin: string, clientName: string): Promise<void> {
    await this.reachable(hostIp, sessionId, "/api/pin");
    this.pins.set(hostIp, { pin, name: clientName });
  }

  /**
   * The client's side of pairing (what Moonlight does with the PIN): the host's pending PIN becomes a paired client
   * under its name, kept on the account volume. The pretend streaming client does this when it connects.
   */
  completePairing(hostIp: string): HostClient | undefined {
    const pending = this.pins.get(hostIp);
    const clients = this.settings.clientsOf?.(hostIp);
    if (!pending || !clients) return undefined;
    this.pins.delete(hostIp);
    const client = { id: randomUUID().toUpperCase(), name: pending.name };
    clients.push(client);
    return client;
  }

  async listClients(hostIp: string, sessionId: string): Promise<HostClient[]> {
    await this.reachable(hostIp, sessionId, "/api/clients/list");
    return [...(this.settings.clientsOf?.(hostIp) ?? [])];
  }

  async unpairClient(hostIp: string, sessionId: string, clientId: string): Promise<void> {
    await this.reachable(hostIp, sessionId, "/api/clients/unpair");
    const clients = this.settings.clientsOf?.(hostIp);
    const at = clients?.findIndex((c) => c.id === clientId) ?? -1;
    if (clients && at >= 0) clients.splice(at, 1);
  }
}
