import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * The latency beacons of simulated regions (npm start, tests): `GET /<region>` answers 204 after that region's
 * configured latency, so a client measuring round trips sees the regions as near or far as configured. Open to
 * every origin (CORS and Resource Timing), never cached, as a real region's beacon is.
 */
export class SimulatedBeacons {
  private server: Server | undefined;
  private base: string | undefined;

  constructor(
    private readonly latencyMs: ReadonlyMap<string, number>,
    private readonly host = "127.0.0.1",
  ) {}

  /** Listens on `port` (0: any free one); answers the base URL beacons hang off. */
  async listen(port: number): Promise<string> {
    const server = createServer((req, res) => {
      const region = decodeURIComponent((req.url ?? "/").split("?")[0]!.slice(1));
      const delay = this.latencyMs.get(region);
      const headers = {
        "Access-Control-Allow-Origin": "*",
        "Timing-Allow-Origin": "*",
        "Cache-Control": "no-store",
      };
      if (req.method === "OPTIONS") {
        res.writeHead(204, { ...headers, "Access-Control-Allow-Methods": "GET" }).end();
        return;
      }
      if (delay === undefined || (req.method !== "GET" && req.method !== "HEAD")) {
        res.writeHead(404, headers).end();
        return;
      }
      setTimeout(() => res.writeHead(204, headers).end(), delay).unref();
    });
    server.keepAliveTimeout = 30_000;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, this.host, () => resolve());
    });
    this.server = server;
    this.base = `http://${this.host}:${(server.address() as AddressInfo).port}`;
    return this.base;
  }

  urlOf(region: string): string {
    if (!this.base) throw new Error("the simulated beacons are not listening");
    return `${this.base}/${encodeURIComponent(region)}`;
  }

  async close(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
