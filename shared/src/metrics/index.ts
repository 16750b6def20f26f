export * from "./platform-metrics";
export * from "./metrics-middleware";
export * from "./metrics-server";
