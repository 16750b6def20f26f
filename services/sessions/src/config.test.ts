import { ConfigError, loadConfig } from "@cgs/shared";
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
