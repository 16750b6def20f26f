import { telemetryOptionsFromEnv } from "./telemetry-lifecycle";

describe("telemetryOptionsFromEnv", () => {
  it("when an OTLP endpoint is configured, then spans go to OTLP under OTEL_SERVICE_NAME", () => {
    expect(
      telemetryOptionsFromEnv({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318",
        OTEL_SERVICE_NAME: "billing",
      }),
    ).toEqual({ exporter: "otlp", serviceName: "billing" });
    expect(
      telemetryOptionsFromEnv({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://c:4318/v1/traces" }).exporter,
    ).toBe("otlp");
  });

  it("when OTEL_TRACES_EXPORTER=console, then spans are printed even with an endpoint set", () => {
    expect(
      telemetryOptionsFromEnv({
        OTEL_TRACES_EXPORTER: "console",
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318",
      }).exporter,
    ).toBe("console");
  });

  it("when OTEL_TRACES_EXPORTER=zipkin, then spans go to Zipkin even with an OTLP endpoint set", () => {
    expect(
      telemetryOptionsFromEnv({
        OTEL_TRACES_EXPORTER: "zipkin",
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318",
        OTEL_SERVICE_NAME: "gateway",
      }),
    ).toEqual({ exporter: "zipkin", serviceName: "gateway" });
  });

  it("when nothing is configured or the exporter is none, then nothing is exported", () => {
    expect(telemetryOptionsFromEnv({})).toEqual({ exporter: "none", serviceName: undefined });
    expect(
      telemetryOptionsFromEnv({ OTEL_TRACES_EXPORTER: "none", OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" })
        .exporter,
    ).toBe("none");
  });
});
