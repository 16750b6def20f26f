import { defineConfig } from "drizzle-kit";

// Migrations for shared's own tests; each service keeps its own config and spreads the shared tables into its schema.
export default defineConfig({
  dialect: "postgresql",
  schema: "./src/testing/test-schema.ts",
  out: "./src/testing/migrations",
});
