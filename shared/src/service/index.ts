export * from "./run-service";
export * from "./service-app";
export * from "./event-workers";
export * from "./periodic-worker";
