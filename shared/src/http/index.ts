export * from "./logger";
export * from "./request-id-middleware";
export * from "./logging-middleware";
export * from "./health-routes";
export * from "./base-app";
export * from "./server";
export * from "./headers";
export * from "./request-input";
