import { z } from "zod";
import { commonServiceEnv, ConfigError, envBoolean, envList, loadConfig, oidcSettings } from "./config";

const schema = z.object({
  ...commonServiceEnv(8101),
  DATABASE_URL: z.string().url().describe("PostgreSQL connection string"),
  FEATURE_X: envBoolean(false).describe("Turns feature X on"),
  ORIGINS: envList(["http://a"]),
});

describe("loadConfig", () => {
  it("when every variable is valid or defaulted, then it returns a typed config with defaults applied", () => {
    const config = loadConfig(schema, {
      DATABASE_URL: "postgres://u:p@127.0.0.1:5432/db",
      FEATURE_X: "1",
      ORIGINS: "x, y,,",
    });
    expect(config.PORT).toBe(8101);
    expect(config.HOST).toBe("127.0.0.1");
    expect(config.OIDC_CLOCK_TOLERANCE_SECONDS).toBe(30);
    expect(config.FEATURE_X).toBe(true);
    expect(config.ORIGINS).toEqual(["x", "y"]);
    expect(oidcSettings(config).jwksUrl).toBe(
      "http://127.0.0.1:8081/realms/cgs/protocol/openid-connect/certs",
    );
  });

  it("when OIDC_JWKS_URL is set, then it wins over the issuer-derived default", () => {
    const config = loadConfig(schema, {
      DATABASE_URL: "postgres://x@h/d",
      OIDC_ISSUER: "https://id.example.com/realms/cgs/",
      OIDC_JWKS_URL: "https://keys.example.com/jwks",
    });
    expect(oidcSettings(config)).toMatchObject({
      issuer: "https://id.example.com/realms/cgs",
      jwksUrl: "https://keys.example.com/jwks",
    });
  });

  it("when several variables are bad, then the ConfigError lists every one with its description", () => {
    let error: unknown;
    try {
      loadConfig(schema, {
        PORT: "seventy",
        LOG_LEVEL: "loud",
        FEATURE_X: "maybe",
        OIDC_CLOCK_TOLERANCE_SECONDS: "-1",
      });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const configError = error as ConfigError;
    expect(configError.issues.map((i) => i.variable).sort()).toEqual(
      ["DATABASE_URL", "FEATURE_X", "LOG_LEVEL", "OIDC_CLOCK_TOLERANCE_SECONDS", "PORT"].sort(),
    );
    expect(configError.message).toContain("DATABASE_URL: is required (PostgreSQL connection string)");
    expect(configError.message).toContain("PORT:");
    expect(configError.message).toContain("TCP port to listen on");
    expect(configError.message).toContain("FEATURE_X");
  });

  it("when a variable is set to an empty string, then it counts as unset and the default applies", () => {
    const config = loadConfig(schema, { DATABASE_URL: "postgres://x@h/d", PORT: "" });
    expect(config.PORT).toBe(8101);
  });
});
