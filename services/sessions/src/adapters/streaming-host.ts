import type { StreamingCredentials } from "../domain/streaming-credentials";

/** The streaming server on a session's instance (Sunshine): readiness and pairing, with that instance's own credentials. */
export interface StreamingHost {
  /** True when the session's host at this address answers its API. */
  isReady(hostIp: string, sessionId: string): Promise<boolean>;
  /** Hands a pairing PIN to the host (Sunshine's POST /api/pin). Throws when the host does not accept it. */
  submitPin(hostIp: string, sessionId: string, pin: string, clientName: string): Promise<void>;
}

/** The session's own streaming-host credentials (undefined when none were issued). */
export type CredentialLookup = (sessionId: string) => Promise<StreamingCredentials | undefined>;

export interface SunshineSettings {
  /** Base URL with `{ip}` in place of the host address, e.g. https://{ip}:47990. */
  urlTemplate: string;
  credentials: CredentialLookup;
  timeoutMs: number;
}

/** Sunshine's web API over HTTP(S) with basic auth: each instance's own pair, never a shared one. */
export class SunshineStreamingHost implements StreamingHost {
  constructor(private readonly settings: SunshineSettings) {}

  private url(hostIp: string, path: string): string {
    return this.settings.urlTemplate.replace("{ip}", hostIp).replace(/\/+$/, "") + path;
  }

  private async headers(sessionId: string): Promise<Record<string, string>> {
    const credentials = await this.settings.credentials(sessionId);
    if (!credentials) throw new Error(`no streaming-host credentials for session ${sessionId}`);
    const basic = Buffer.from(`${credentials.username}:${credentials.password}`).toString("base64");
    return { authorization: `Basic ${basic}`, "content-type": "application/json" };
  }

  async isReady(hostIp: string, sessionId: string): Promise<boolean> {
    try {
      const res = await fetch(this.url(hostIp, "/api/apps"), {
        headers: await this.headers(sessionId),
        signal: AbortSignal.timeout(this.settings.timeoutMs),
      });
      await res.arrayBuffer();
      return res.ok;
    } catch {
      return false;
    }
  }

  async submitPin(hostIp: string, sessionId: string, pin: string, clientName: string): Promise<void> {
    const res = await fetch(this.url(hostIp, "/api/pin"), {
      method: "POST",
      headers: await this.headers(sessionId),
      body: JSON.stringify({ pin, name: clientName }),
      signal: AbortSignal.timeout(this.settings.timeoutMs),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`streaming host answered ${res.status} to /api/pin`);
    // Sunshine answers 200 {"status": "true"|"false"}; "false" means no client is waiting for a PIN.
    let status: unknown;
    try {
      status = (JSON.parse(text) as { status?: unknown }).status;
    } catch {
      status = undefined;
    }
    if (status === false || status === "false") throw new Error("streaming host did not accept the PIN");
  }
}

export interface SimulatedStreamingHostSettings {
  readyDelayMs: number;
  now?: () => number;
  /** The credentials the sessions service presents for a session (its vault); unset = no check. */
  credentials?: CredentialLookup;
  /** The credentials installed on the host at this address at launch (the cloud simulator's record). */
  installed?: (hostIp: string) => StreamingCredentials | undefined;
}

/**
 * In-process stand-in for `npm start` and tests: a host answers `readyDelayMs` after it was first probed,
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

  /** Whether the host at this address answers at all (its agent's Sunshine probe). */
  answers(hostIp: string): boolean {
    if (this.downHosts.has(hostIp)) return false;
    const first = this.firstSeen.get(hostIp) ?? this.now();
    this.firstSeen.set(hostIp, first);
    return this.now() - first >= this.settings.readyDelayMs;
  }

  async isReady(hostIp: string, sessionId: string): Promise<boolean> {
    this.probes += 1;
    return this.answers(hostIp) && (await this.accepts(hostIp, sessionId));
  }

  async submitPin(hostIp: string, sessionId: string, pin: string, clientName: string): Promise<void> {
    if (!this.answers(hostIp)) throw new Error(`streaming host ${hostIp} is not answering`);
    if (!(await this.accepts(hostIp, sessionId))) throw new Error("streaming host answered 401 to /api/pin");
    this.pins.set(hostIp, { pin, name: clientName });
  }
}
