import { defineConfig } from "drizzle-kit";

export default defineConfig({
  dialect: "postgresql",
  schema: ["../../shared/src/db/shared-tables.ts", "./src/data/billing-tables.ts"],
  out: "./drizzle",
});
