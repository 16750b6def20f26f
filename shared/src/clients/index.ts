export * from "./internal-http";
export * from "./accounts-client";
