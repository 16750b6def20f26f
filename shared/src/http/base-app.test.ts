import pino from "pino";
import { createBaseApp } from "./base-app";
import { startServer, type RunningServer } from "./server";

const silent = pino({ level: "silent" });

async function clientIpServer(trustProxy: string | number): Promise<RunningServer> {
  const app = createBaseApp({ logger: silent, trustProxy });
  app.get("/ip", (req, res) => res.json({ ip: req.ip, protocol: req.protocol }));
  return startServer(app, { port: 0, logger: silent });
}

async function seenAs(server: RunningServer, forwardedFor?: string, proto?: string): Promise<unknown> {
  const headers: Record<string, string> = {};
  if (forwardedFor) headers["x-forwarded-for"] = forwardedFor;
  if (proto) headers["x-forwarded-proto"] = proto;
  const res = await fetch(`${server.url}/ip`, { headers });
  return res.json();
}

describe("trust proxy", () => {
  it("when requests come through trusted and untrusted hops in turn, then each gets its own client address, as Express decides it", async () => {
    const server = await clientIpServer("loopback");
    try {
      // The peer is loopback (trusted), so X-Forwarded-For is believed up to the first untrusted hop.
      for (let round = 0; round < 2; round++) {
        expect(await seenAs(server)).toEqual({ ip: "127.0.0.1", protocol: "http" });
        expect(await seenAs(server, "203.0.113.9", "https")).toEqual({
          ip: "203.0.113.9",
          protocol: "https",
        });
        expect(await seenAs(server, "10.0.0.1, 127.0.0.1")).toMatchObject({ ip: "10.0.0.1" });
        expect(await seenAs(server, "10.0.0.1, 203.0.113.7")).toMatchObject({ ip: "203.0.113.7" });
        const long = ["198.51.100.1", ...Array<string>(10).fill("127.0.0.1")].join(", ");
        expect(await seenAs(server, long)).toMatchObject({ ip: "198.51.100.1" });
      }
    } finally {
      await server.stop();
    }
  });

  it("when trust is a hop count, then the same addresses are trusted at one hop and not at the next", async () => {
    const server = await clientIpServer(1);
    try {
      for (let round = 0; round < 2; round++) {
        expect(await seenAs(server, "198.51.100.1, 198.51.100.2")).toMatchObject({ ip: "198.51.100.2" });
        // The peer's address is trusted at hop 0; the same address one hop further is not.
        expect(await seenAs(server, "198.51.100.1, 127.0.0.1")).toMatchObject({ ip: "127.0.0.1" });
      }
    } finally {
      await server.stop();
    }
  });
});
