/** The streaming server on an instance (Sunshine): readiness and pairing. */
export interface StreamingHost {
  /** True when the host at this address answers its API. */
  isReady(hostIp: string): Promise<boolean>;
  /** Hands a pairing PIN to the host (Sunshine's POST /api/pin). Throws when the host does not accept it. */
  submitPin(hostIp: string, pin: string, clientName: string): Promise<void>;
}

export interface SunshineSettings {
  /** Base URL with `{ip}` in place of the host address, e.g. https://{ip}:47990. */
  urlTemplate: string;
  username: string;
  password: string;
  timeoutMs: number;
}

/** Sunshine's web API over HTTP(S) with basic auth. */
export class SunshineStreamingHost implements StreamingHost {
  constructor(private readonly settings: SunshineSettings) {}

  private url(hostIp: string, path: string): string {
    return this.settings.urlTemplate.replace("{ip}", hostIp).replace(/\/+$/, "") + path;
  }

  private headers(): Record<string, string> {
    const basic = Buffer.from(`${this.settings.username}:${this.settings.password}`).toString("base64");
    return { authorization: `Basic ${basic}`, "content-type": "application/json" };
  }

  async isReady(hostIp: string): Promise<boolean> {
    try {
      const res = await fetch(this.url(hostIp, "/api/apps"), {
        headers: this.headers(),
        signal: AbortSignal.timeout(this.settings.timeoutMs),
      });
      await res.arrayBuffer();
      return res.ok;
    } catch {
      return false;
    }
  }

  async submitPin(hostIp: string, pin: string, clientName: string): Promise<void> {
    const res = await fetch(this.url(hostIp, "/api/pin"), {
      method: "POST",
      headers: this.headers(),
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

/**
 * In-process stand-in for `npm start` and tests: a host answers `readyDelayMs` after it was first probed,
 * and records the PINs it was given. `down()` makes a host refuse everything.
 */
export class SimulatedStreamingHost implements StreamingHost {
  private readonly firstSeen = new Map<string, number>();
  private readonly downHosts = new Set<string>();
  readonly pins = new Map<string, { pin: string; name: string }>();
  probes = 0;

  constructor(private readonly settings: { readyDelayMs: number; now?: () => number }) {}

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

  private answers(hostIp: string): boolean {
    if (this.downHosts.has(hostIp)) return false;
    const first = this.firstSeen.get(hostIp) ?? this.now();
    this.firstSeen.set(hostIp, first);
    return this.now() - first >= this.settings.readyDelayMs;
  }

  isReady(hostIp: string): Promise<boolean> {
    this.probes += 1;
    return Promise.resolve(this.answers(hostIp));
  }

  submitPin(hostIp: string, pin: string, clientName: string): Promise<void> {
    if (!this.answers(hostIp)) return Promise.reject(new Error(`streaming host ${hostIp} is not answering`));
    this.pins.set(hostIp, { pin, name: clientName });
    return Promise.resolve();
  }
}
