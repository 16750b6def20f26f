import dgram from "node:dgram";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { ProcNetClientDetector } from "./streaming-client-detector";

const until = async (check: () => Promise<boolean>, ms = 3_000) => {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 25));
  }
};

describe("streaming clients from the kernel's socket tables", () => {
  let server: net.Server;
  let port: number;
  const accepted = new Set<net.Socket>();

  beforeAll(async () => {
    // A listener standing in for Sunshine's streaming port (Sunshine itself cannot be installed here).
    server = net.createServer((s) => {
      accepted.add(s);
      s.on("close", () => accepted.delete(s));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    for (const s of accepted) s.destroy();
    await new Promise((r) => server.close(r));
  });

  it("when a client connects to a streaming TCP port, then one client is counted; when it leaves, none", async () => {
    const detector = new ProcNetClientDetector({ tcp: [port], udp: { from: 1, to: 1 } });
    expect(await detector.connectedClients()).toBe(0);
    const client = net.connect(port, "127.0.0.1");
    await new Promise((r) => client.once("connect", r));
    await until(async () => (await detector.connectedClients()) === 1);
    client.destroy();
    await until(async () => (await detector.connectedClients()) === 0);
  });

  it("when a connection is to another port, then it is not a streaming client", async () => {
    const detector = new ProcNetClientDetector({ tcp: [port + 1], udp: { from: 1, to: 1 } });
    const client = net.connect(port, "127.0.0.1");
    await new Promise((r) => client.once("connect", r));
    expect(await detector.connectedClients()).toBe(0);
    client.destroy();
  });

  it("when a media socket on the UDP range is connected to a client, then it counts", async () => {
    const media = dgram.createSocket("udp4");
    await new Promise<void>((resolve) => media.bind(0, "127.0.0.1", resolve));
    const mediaPort = media.address().port;
    const detector = new ProcNetClientDetector({ tcp: [], udp: { from: mediaPort, to: mediaPort } });
    expect(await detector.connectedClients()).toBe(0);
    const player = dgram.createSocket("udp4");
    await new Promise<void>((resolve) => player.bind(0, "127.0.0.1", resolve));
    await new Promise<void>((resolve) => media.connect(player.address().port, "127.0.0.1", resolve));
    expect(await detector.connectedClients()).toBe(1);
    media.close();
    player.close();
  });

  it("when Sunshine's prep-command hook announces streams, then they count even with no socket to see", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "streams-"));
    const file = path.join(dir, "streams");
    const detector = new ProcNetClientDetector({ tcp: [], udp: { from: 1, to: 1 } }, "/proc/net", file);
    expect(await detector.connectedClients()).toBe(0);
    writeFileSync(file, "2\n");
    expect(await detector.connectedClients()).toBe(2);
    writeFileSync(file, "0\n");
    expect(await detector.connectedClients()).toBe(0);
    rmSync(dir, { recursive: true, force: true });
  });
});
