export * from "./run-service";
export * from "./service-app";
