import { execFileSync } from "node:child_process";
import { X509Certificate } from "node:crypto";
import * as fs from "node:fs";
import * as https from "node:https";
import type { AddressInfo } from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { normalizeFingerprint } from "@cgs/host-agent";
import { HostIdentityError, SunshineStreamingHost } from "./streaming-host";

const SESSION = "3f1c2d9e-0000-4000-8000-000000000001";
const CREDENTIALS = { username: "cgs-0a1b2c3d", password: "s3cret-password" };

interface Identity {
  key: string;
  cert: string;
  /** As Node prints it: upper-case hex pairs joined by colons. */
  fingerprint: string;
}

/** A self-signed key and certificate like the one a streaming host makes at its first boot (RSA 2048). */
function selfSigned(dir: string, name: string): Identity {
  const key = path.join(dir, `${name}.key`);
  const cert = path.join(dir, `${name}.pem`);
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-sha256",
      "-days",
      "2",
      "-subj",
      "/CN=Sunshine Gamestream Host",
      "-keyout",
      key,
      "-out",
      cert,
    ],
    { stdio: "ignore" },
  );
  const pem = fs.readFileSync(cert, "utf8");
  return {
    key: fs.readFileSync(key, "utf8"),
    cert: pem,
    fingerprint: new X509Certificate(pem).fingerprint256,
  };
}

interface SunshineServer {
  url: string;
  port: number;
  /** TCP connections accepted, and HTTP requests received. */
  connections: number;
  requests: { method: string; path: string; authorization?: string; body: string }[];
  pins: { pin: string; name: string }[];
  /** Sunshine's named_certs: a client is paired when its PIN arrives (the client's side finishes at once). */
  clients: { name: string; uuid: string }[];
  refuseNext: number;
  close(): Promise<void>;
}

/** A real HTTPS server answering like Sunshine's API (GET /api/apps, POST /api/pin) behind basic auth. */
async function startSunshine(identity: Identity): Promise<SunshineServer> {
  const expected = `Basic ${Buffer.from(`${CREDENTIALS.username}:${CREDENTIALS.password}`).toString("base64")}`;
  const state = { connections: 0, refuseNext: 0 };
  const requests: SunshineServer["requests"] = [];
  const pins: SunshineServer["pins"] = [];
  const clients: SunshineServer["clients"] = [];
  const server = https.createServer({ key: identity.key, cert: identity.cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      requests.push({
        method: req.method ?? "",
        path: req.url ?? "",
        authorization: req.headers.authorization,
        body,
      });
      const reply = (status: number, payload: unknown) =>
        res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(payload));
      if (state.refuseNext > 0) {
        state.refuseNext -= 1;
        return reply(503, { error: "starting" });
      }
      if (req.headers.authorization !== expected) return reply(401, { error: "Unauthorized" });
      if (req.method === "GET" && req.url === "/api/apps") return reply(200, { apps: [] });
      if (req.method === "POST" && req.url === "/api/pin") {
        const { pin, name } = JSON.parse(body) as { pin: string; name: string };
        pins.push({ pin, name });
        clients.push({ name, uuid: `C0FFEE00-0000-4000-8000-${String(clients.length).padStart(12, "0")}` });
        return reply(200, { status: "true" });
      }
      if (req.method === "GET" && req.url === "/api/clients/list") {
        return reply(200, {
          named_certs: clients.map((c) => ({ ...c, cert: "-----BEGIN CERTIFICATE-----" })),
          status: true,
        });
      }
      if (req.method === "POST" && req.url === "/api/clients/unpair") {
        const { uuid } = JSON.parse(body) as { uuid: string };
        const at = clients.findIndex((c) => c.uuid === uuid);
        if (at >= 0) clients.splice(at, 1);
        return reply(200, { status: true });
      }
      reply(404, { error: "Not Found" });
    });
  });
  server.on("connection", () => (state.connections += 1));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `https://127.0.0.1:${port}`,
    port,
    get connections() {
      return state.connections;
    },
    requests,
    pins,
    clients,
    get refuseNext() {
      return state.refuseNext;
    },
    set refuseNext(n: number) {
      state.refuseNext = n;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

let dir: string;
let hostIdentity: Identity;
let impostorIdentity: Identity;
let sunshine: SunshineServer;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "cgs-pinning-"));
  hostIdentity = selfSigned(dir, "host");
  impostorIdentity = selfSigned(dir, "impostor");
  sunshine = await startSunshine(hostIdentity);
});

afterAll(async () => {
  await sunshine.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

function hostPinnedTo(fingerprint: string | undefined, credentials = CREDENTIALS, port = sunshine.port) {
  return new SunshineStreamingHost({
    urlTemplate: `https://{ip}:${port}`,
    credentials: async () => credentials,
    fingerprint: async () => fingerprint,
    timeoutMs: 2_000,
  });
}

describe("SunshineStreamingHost pins the host certificate", () => {
  it("when the host's certificate has the pinned fingerprint, then readiness is true and the PIN reaches POST /api/pin with basic auth", async () => {
    const host = hostPinnedTo(hostIdentity.fingerprint);
    expect(await host.isReady("127.0.0.1", SESSION)).toBe(true);
    await host.submitPin("127.0.0.1", SESSION, "0427", "cgs-client");
    expect(sunshine.pins.at(-1)).toEqual({ pin: "0427", name: "cgs-client" });
    expect(sunshine.requests.at(-1)).toMatchObject({
      method: "POST",
      path: "/api/pin",
      authorization: `Basic ${Buffer.from(`${CREDENTIALS.username}:${CREDENTIALS.password}`).toString("base64")}`,
    });
  });

  it("when clients are listed and one is unpaired, then the adapter reads Sunshine's named_certs and unpairs by uuid, pinned", async () => {
    const host = hostPinnedTo(hostIdentity.fingerprint);
    await host.submitPin("127.0.0.1", SESSION, "1111", "living-room-tv");
    await host.submitPin("127.0.0.1", SESSION, "2222", "phone");
    const listed = await host.listClients("127.0.0.1", SESSION);
    expect(listed.map((c) => c.name)).toEqual(expect.arrayContaining(["living-room-tv", "phone"]));
    const tv = listed.find((c) => c.name === "living-room-tv")!;
    await host.unpairClient("127.0.0.1", SESSION, tv.id);
    expect(sunshine.requests.at(-1)).toMatchObject({
      method: "POST",
      path: "/api/clients/unpair",
      body: JSON.stringify({ uuid: tv.id }),
    });
    expect((await host.listClients("127.0.0.1", SESSION)).map((c) => c.name)).not.toContain("living-room-tv");
    await expect(
      hostPinnedTo(impostorIdentity.fingerprint).listClients("127.0.0.1", SESSION),
    ).rejects.toThrow(HostIdentityError);
  });

  it("when the fingerprint is reported in another spelling (plain lower-case hex), then it still matches", async () => {
    const plain = hostIdentity.fingerprint.replace(/:/g, "").toLowerCase();
    expect(await hostPinnedTo(plain).isReady("127.0.0.1", SESSION)).toBe(true);
    expect(normalizeFingerprint(hostIdentity.fingerprint)).toBe(plain);
    expect(normalizeFingerprint("not-a-fingerprint")).toBeUndefined();
  });

  it("when the host presents a different certificate, then the call is refused and no request (no credentials) is sent", async () => {
    const before = sunshine.requests.length;
    const connections = sunshine.connections;
    const host = hostPinnedTo(impostorIdentity.fingerprint);
    expect(await host.isReady("127.0.0.1", SESSION)).toBe(false);
    await expect(host.submitPin("127.0.0.1", SESSION, "1234", "c")).rejects.toThrow(HostIdentityError);
    await expect(host.submitPin("127.0.0.1", SESSION, "1234", "c")).rejects.toThrow(
      /presented a certificate other than the one pinned/,
    );
    expect(sunshine.connections).toBeGreaterThan(connections);
    expect(sunshine.requests.length).toBe(before);
    expect(sunshine.pins.map((p) => p.pin)).not.toContain("1234");
  });

  it("when no fingerprint is known for the session, then the call is refused without connecting", async () => {
    const before = sunshine.requests.length;
    const connections = sunshine.connections;
    const host = hostPinnedTo(undefined);
    expect(await host.isReady("127.0.0.1", SESSION)).toBe(false);
    await expect(host.submitPin("127.0.0.1", SESSION, "4321", "c")).rejects.toThrow(
      new HostIdentityError(`no host certificate fingerprint known for session ${SESSION}`),
    );
    expect(sunshine.connections).toBe(connections);
    expect(sunshine.requests.length).toBe(before);
  });

  it("when the URL template is plain http, then the adapter refuses to be built (nothing would be pinned)", () => {
    expect(
      () =>
        new SunshineStreamingHost({
          urlTemplate: "http://{ip}:47990",
          credentials: async () => CREDENTIALS,
          fingerprint: async () => hostIdentity.fingerprint,
          timeoutMs: 500,
        }),
    ).toThrow("STREAMING_HOST_URL_TEMPLATE must be an https:// URL: every Sunshine call is pinned");
  });

  it("when the credentials are wrong or the host is still coming up, then readiness is false and the PIN is refused", async () => {
    const wrong = hostPinnedTo(hostIdentity.fingerprint, { ...CREDENTIALS, password: "wrong" });
    expect(await wrong.isReady("127.0.0.1", SESSION)).toBe(false);
    await expect(wrong.submitPin("127.0.0.1", SESSION, "1234", "c")).rejects.toThrow(/401/);
    sunshine.refuseNext = 1;
    const right = hostPinnedTo(hostIdentity.fingerprint);
    expect(await right.isReady("127.0.0.1", SESSION)).toBe(false);
    expect(await right.isReady("127.0.0.1", SESSION)).toBe(true);
  });

  it("when nothing listens at the host address, then readiness is false", async () => {
    expect(await hostPinnedTo(hostIdentity.fingerprint, CREDENTIALS, 9).isReady("127.0.0.1", SESSION)).toBe(
      false,
    );
  });
});
