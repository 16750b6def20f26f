export * from "./keycloak-admin-client";
