import { startSunshineStandIn } from "../testing/streaming-stand-ins";
import { SunshineStreamingHost } from "./streaming-host";

const SESSION = "3f1c2d9e-0000-4000-8000-000000000001";

describe("SunshineStreamingHost over HTTP", () => {
  it("when the host answers, then readiness is true and the PIN reaches POST /api/pin with basic auth", async () => {
    const sunshine = await startSunshineStandIn({ username: "admin", password: "s3cret" });
    try {
      const port = new URL(sunshine.url).port;
      const host = new SunshineStreamingHost({
        urlTemplate: `http://{ip}:${port}`,
        credentials: async () => ({ username: "admin", password: "s3cret" }),
        timeoutMs: 2_000,
      });
      expect(await host.isReady("127.0.0.1", SESSION)).toBe(true);
      await host.submitPin("127.0.0.1", SESSION, "0427", "cgs-client");
      expect(sunshine.pins).toEqual([{ pin: "0427", name: "cgs-client" }]);
      expect(sunshine.requests.at(-1)).toMatchObject({ method: "POST", path: "/api/pin" });
    } finally {
      await sunshine.close();
    }
  });

  it("when the credentials are wrong or the host is still coming up, then readiness is false and the PIN is refused", async () => {
    const sunshine = await startSunshineStandIn({ username: "admin", password: "right" });
    try {
      const port = new URL(sunshine.url).port;
      const wrong = new SunshineStreamingHost({
        urlTemplate: `http://{ip}:${port}`,
        credentials: async () => ({ username: "admin", password: "wrong" }),
        timeoutMs: 2_000,
      });
      expect(await wrong.isReady("127.0.0.1", SESSION)).toBe(false);
      await expect(wrong.submitPin("127.0.0.1", SESSION, "1234", "c")).rejects.toThrow(/401/);
      sunshine.refuseNext = 1;
      const right = new SunshineStreamingHost({
        urlTemplate: `http://{ip}:${port}`,
        credentials: async () => ({ username: "admin", password: "right" }),
        timeoutMs: 2_000,
      });
      expect(await right.isReady("127.0.0.1", SESSION)).toBe(false);
      expect(await right.isReady("127.0.0.1", SESSION)).toBe(true);
    } finally {
      await sunshine.close();
    }
  });

  it("when nothing listens at the host address, then readiness is false", async () => {
    const host = new SunshineStreamingHost({
      urlTemplate: "http://{ip}:9",
      credentials: async () => ({ username: "u", password: "p" }),
      timeoutMs: 500,
    });
    expect(await host.isReady("127.0.0.1", SESSION)).toBe(false);
  });
});
