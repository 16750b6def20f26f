export * from "./jwt-verifier";
export * from "./auth-middleware";
