export * from "./component-logger";
export * from "./database-types";
export * from "./open-database";
export * from "./shared-tables";
