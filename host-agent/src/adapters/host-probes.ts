import { X509Certificate } from "node:crypto";
import { readFile } from "node:fs/promises";
import https from "node:https";
import http from "node:http";
import type { CertificateSource, InstanceIdentity, SunshineProbe } from "../agent/host-agent";
import { normalizeFingerprint } from "../protocol/host-report";

/**
 * Sunshine answers when its API gives any HTTP answer below 500 (a 401 still means it is up). Its certificate is
 * self-signed and checked by fingerprint on the platform side, so the agent, on the same host, does not verify it.
 */
export class HttpSunshineProbe implements SunshineProbe {
  constructor(
    private readonly apiUrl: string,
    private readonly credentials?: { username: string; password: string },
    private readonly timeoutMs = 2_000,
  ) {}

  answers(): Promise<boolean> {
    const url = new URL("/api/apps", this.apiUrl);
    const client = url.protocol === "https:" ? https : http;
    const headers: Record<string, string> = {};
    if (this.credentials) {
      const basic = Buffer.from(`${this.credentials.username}:${this.credentials.password}`).toString(
        "base64",
      );
      headers.authorization = `Basic ${basic}`;
    }
    return new Promise((resolve) => {
      const req = client.get(url, { headers, rejectUnauthorized: false, timeout: this.timeoutMs }, (res) => {
        res.resume();
        resolve((res.statusCode ?? 500) < 500);
      });
      req.on("timeout", () => req.destroy(new Error("timeout")));
      req.on("error", () => resolve(false));
    });
  }
}

/** The SHA-256 of the certificate file Sunshine serves (PEM); null while the file does not exist yet. */
export class CertificateFile implements CertificateSource {
  constructor(private readonly path: string) {}

  async sha256(): Promise<string | null> {
    let pem: string;
    try {
      pem = await readFile(this.path, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw err;
    }
    return normalizeFingerprint(new X509Certificate(pem).fingerprint256) ?? null;
  }
}

/** The instance id from EC2's instance metadata service, version 2 (a session token first; IMDSv1 is off). */
export class ImdsIdentity implements InstanceIdentity {
  constructor(
    private readonly endpoint = "http://169.254.169.254",
    private readonly timeoutMs = 2_000,
  ) {}

  async instanceId(): Promise<string> {
    const base = this.endpoint.replace(/\/+$/, "");
    const tokenRes = await fetch(`${base}/latest/api/token`, {
      method: "PUT",
      headers: { "x-aws-ec2-metadata-token-ttl-seconds": "300" },
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    if (!tokenRes.ok) throw new Error(`instance metadata refused a token (HTTP ${tokenRes.status})`);
    const token = await tokenRes.text();
    const res = await fetch(`${base}/latest/meta-data/instance-id`, {
      headers: { "x-aws-ec2-metadata-token": token },
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    if (!res.ok) throw new Error(`instance metadata answered HTTP ${res.status} for instance-id`);
    return (await res.text()).trim();
  }
}

/** An instance id given in the environment (tests, or a host that is not on EC2). */
export class StaticIdentity implements InstanceIdentity {
  constructor(private readonly id: string) {}
  instanceId(): Promise<string> {
    return Promise.resolve(this.id);
  }
}
