import { readFile } from "node:fs/promises";
import type { StreamingClientDetector } from "../agent/host-agent";

export interface StreamingPorts {
  tcp: readonly number[];
  udp: { from: number; to: number };
}

/** Sunshine's ports: HTTPS and HTTP (pairing, app launch), RTSP; video, control and audio over UDP. */
export const SUNSHINE_PORTS: StreamingPorts = { tcp: [47984, 47989, 48010], udp: { from: 47998, to: 48010 } };

const ESTABLISHED = "01";

/** Remote endpoints of established sockets on the given local ports, from one /proc/net/{tcp,udp}[6] table. */
export function connectedPeers(table: string, isLocalPort: (port: number) => boolean): Set<string> {
  const peers = new Set<string>();
  for (const line of table.split("\n").slice(1)) {
    const fields = line.trim().split(/\s+/);
    const [, local, remote, state] = fields;
    if (!local || !remote || state !== ESTABLISHED) continue;
    const localPort = parseInt(local.split(":")[1] ?? "", 16);
    const [remoteIp, remotePort] = remote.split(":");
    if (!isLocalPort(localPort) || !remoteIp || /^0+$/.test(remoteIp)) continue;
    peers.add(`${remoteIp}:${remotePort}`);
  }
  return peers;
}

/**
 * Counts streaming clients from the kernel's socket tables: established TCP connections to Sunshine's TCP ports
 * and connected UDP sockets on its media ports, by distinct remote host. Sunshine also runs its `global_prep_cmd`
 * hook when a stream starts and ends; the image points it at `cgs-stream-state`, which keeps the number of active
 * streams in `streamStateFile`, so a stream whose media flows over unconnected UDP still counts.
 */
export class ProcNetClientDetector implements StreamingClientDetector {
  constructor(
    private readonly ports: StreamingPorts = SUNSHINE_PORTS,
    private readonly procNet = "/proc/net",
    private readonly streamStateFile?: string,
  ) {}

  private async table(name: string): Promise<string> {
    try {
      return await readFile(`${this.procNet}/${name}`, "utf8");
    } catch {
      return ""; // no IPv6 on this host, say
    }
  }

  private async announcedStreams(): Promise<number> {
    if (!this.streamStateFile) return 0;
    try {
      const n = parseInt((await readFile(this.streamStateFile, "utf8")).trim(), 10);
      return Number.isFinite(n) && n > 0 ? n : 0;
    } catch {
      return 0;
    }
  }

  async connectedClients(): Promise<number> {
    const tcp = new Set(this.ports.tcp);
    const { from, to } = this.ports.udp;
    const [tcp4, tcp6, udp4, udp6, announced] = await Promise.all([
      this.table("tcp"),
      this.table("tcp6"),
      this.table("udp"),
      this.table("udp6"),
      this.announcedStreams(),
    ]);
    const hosts = new Set<string>();
    const hostOf = (peer: string) => peer.split(":")[0] ?? peer;
    for (const table of [tcp4, tcp6])
      for (const p of connectedPeers(table, (port) => tcp.has(port))) hosts.add(hostOf(p));
    for (const table of [udp4, udp6])
      for (const p of connectedPeers(table, (port) => port >= from && port <= to)) hosts.add(hostOf(p));
    return Math.max(hosts.size, announced);
  }
}
