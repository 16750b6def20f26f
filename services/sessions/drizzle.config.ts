import { defineConfig } from "drizzle-kit";

export default defineConfig({
  dialect: "postgresql",
  schema: [
    "../../shared/src/db/shared-tables.ts",
    "./src/data/session-tables.ts",
    "./src/data/streaming-credential-tables.ts",
    "./src/data/device-tables.ts",
    "./src/data/private-network-tables.ts",
    "./src/data/pool-tables.ts",
  ],
  out: "./drizzle",
});
