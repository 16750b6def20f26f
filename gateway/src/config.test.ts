import { ConfigError } from "@cgs/shared";
import { loadGatewayConfig } from "./config";

describe("loadGatewayConfig", () => {
  it("when nothing is set, then the local defaults apply", () => {
    const config = loadGatewayConfig({});
    expect(config).toMatchObject({
      PORT: 8080,
      HOST: "127.0.0.1",
      SESSIONS_URL: "http://127.0.0.1:8101",
      AUTH_PROXY_URL: "http://127.0.0.1:8104",
      TRUST_PROXY: "loopback",
      RATE_LIMIT_READ: 60,
      RATE_LIMIT_WRITE: 20,
      RATE_LIMIT_POLL: 30,
      SESSION_COOKIE_NAME: "cgs_session",
    });
    expect(config.REDIS_URL).toBeUndefined();
  });

  it("when LOCAL_CHECKOUT is asked for in production, then start-up fails naming it", () => {
    expect(loadGatewayConfig({ LOCAL_CHECKOUT: "true" }).LOCAL_CHECKOUT).toBe(true);
    expect(loadGatewayConfig({}).LOCAL_CHECKOUT).toBe(false);
    expect(() =>
      loadGatewayConfig({
        NODE_ENV: "production",
        LOCAL_CHECKOUT: "true",
        PORTAL_COOKIE_SECRET: "x".repeat(32),
      }),
    ).toThrow(/LOCAL_CHECKOUT.*not allowed in production/);
  });

  it("when TRUST_PROXY is a hop count, then it becomes a number", () => {
    expect(loadGatewayConfig({ TRUST_PROXY: "2" }).TRUST_PROXY).toBe(2);
  });

  it("when several variables are wrong, then one error names each of them", () => {
    expect(() =>
      loadGatewayConfig({
        SESSIONS_URL: "not a url",
        REDIS_URL: "http://x",
        RATE_LIMIT_WRITE: "0",
        PORT: "99999",
      }),
    ).toThrow(ConfigError);
    try {
      loadGatewayConfig({
        SESSIONS_URL: "not a url",
        REDIS_URL: "http://x",
        RATE_LIMIT_WRITE: "0",
        PORT: "99999",
      });
    } catch (err) {
      expect((err as ConfigError).issues.map((i) => i.variable).sort()).toEqual(
        ["PORT", "RATE_LIMIT_WRITE", "REDIS_URL", "SESSIONS_URL"].sort(),
      );
      expect((err as ConfigError).message).toContain("Base URL of the sessions service");
    }
  });

  it("when PORTAL_BEACON_ORIGINS is unset, then the simulator's beacon origin is allowed outside production and none in production", () => {
    expect(loadGatewayConfig({}).PORTAL_BEACON_ORIGINS).toEqual(["http://127.0.0.1:8108"]);
    expect(
      loadGatewayConfig({ NODE_ENV: "production", PORTAL_COOKIE_SECRET: "x".repeat(32) })
        .PORTAL_BEACON_ORIGINS,
    ).toEqual([]);
    expect(
      loadGatewayConfig({ PORTAL_BEACON_ORIGINS: " https://beacon.eu.example ,https://b.example:8443/" })
        .PORTAL_BEACON_ORIGINS,
    ).toEqual(["https://beacon.eu.example", "https://b.example:8443"]);
  });

  it.each([
    "beacon.example",
    "https://beacon.example/eu-west-1",
    "ftp://beacon.example",
    "https://a.example,*",
  ])("when PORTAL_BEACON_ORIGINS holds %s, then start-up fails naming the variable", (value) => {
    try {
      loadGatewayConfig({ PORTAL_BEACON_ORIGINS: value });
      throw new Error("expected a ConfigError");
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).issues.map((i) => i.variable)).toEqual(["PORTAL_BEACON_ORIGINS"]);
      expect((err as ConfigError).message).toMatch(/PORTAL_BEACON_ORIGINS: .* is not an origin/);
    }
  });

  it("when the OpenTelemetry sampler is misspelt or its ratio is out of range, then start-up names both variables", () => {
    expect(
      loadGatewayConfig({ OTEL_TRACES_SAMPLER: "parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG: "0.1" }),
    ).toMatchObject({ OTEL_TRACES_SAMPLER: "parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG: 0.1 });
    try {
      loadGatewayConfig({ OTEL_TRACES_SAMPLER: "traceid_ratio", OTEL_TRACES_SAMPLER_ARG: "10" });
      throw new Error("expected a ConfigError");
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).issues.map((i) => i.variable).sort()).toEqual([
        "OTEL_TRACES_SAMPLER",
        "OTEL_TRACES_SAMPLER_ARG",
      ]);
    }
  });
});
