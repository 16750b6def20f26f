import { ConfigError, loadConfig } from "@cgs/shared";
import { privateNetworkFrom } from "./composition";
import { sessionsConfigSchema } from "./config";

describe("sessions config", () => {
  it("when nothing is set, then local runs get the simulators, the configured region and its first zone", () => {
    const config = loadConfig(sessionsConfigSchema, {});
    expect(config).toMatchObject({
      CLOUD_PROVIDER: "simulator",
      STREAMING_HOST: "simulator",
      PRIVATE_NETWORK: "simulator",
      CLOUD_REGION: "us-east-1",
      CLOUD_AVAILABILITY_ZONE: "us-east-1a",
      SESSION_RATE_PER_MINUTE: 10,
      SESSION_CURRENCY: "USD",
    });
  });

  it("when Headscale is chosen without its URL or API key, then start-up names both; its login server defaults to the URL", () => {
    let error: unknown;
    try {
      loadConfig(sessionsConfigSchema, { PRIVATE_NETWORK: "headscale" });
    } catch (err) {
      error = err;
    }
    expect((error as ConfigError).issues.map((i) => i.variable).sort()).toEqual([
      "HEADSCALE_API_KEY",
      "HEADSCALE_URL",
    ]);
    const config = loadConfig(sessionsConfigSchema, {
      PRIVATE_NETWORK: "headscale",
      HEADSCALE_URL: "http://headscale:8080",
      HEADSCALE_API_KEY: "hskey-api-x",
    });
    expect(config).toMatchObject({ PRIVATE_NETWORK: "headscale", HEADSCALE_URL: "http://headscale:8080" });
    expect(privateNetworkFrom(config, undefined as never).loginServer).toBe("http://headscale:8080");
  });

  it("when production leaves the adapters, the PIN secret or the AMI unset, then start-up names each variable", () => {
    let error: unknown;
    try {
      loadConfig(sessionsConfigSchema, { NODE_ENV: "production", PRIVATE_NETWORK: "tailscale" });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const variables = (error as ConfigError).issues.map((i) => i.variable).sort();
    expect(variables).toEqual([
      "CLOUD_PROVIDER",
      "PIN_HASH_SECRET",
      "STREAMING_CREDENTIALS_KEY",
      "STREAMING_HOST",
      "TAILSCALE_API_KEY",
    ]);
    expect(() =>
      loadConfig(sessionsConfigSchema, {
        NODE_ENV: "production",
        CLOUD_PROVIDER: "ec2",
        STREAMING_HOST: "sunshine",
        PRIVATE_NETWORK: "simulator",
        PIN_HASH_SECRET: "0123456789abcdef",
        STREAMING_CREDENTIALS_KEY: Buffer.alloc(32, 7).toString("base64"),
      }),
    ).toThrow(/EC2_LAUNCH_TEMPLATE/);
  });
});
