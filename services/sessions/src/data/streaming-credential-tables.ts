import { pgTable, text, timestamp, uuid } from "drizzle-orm/pg-core";

/**
 * One streaming-host (Sunshine API) credential per session's instance, generated at launch. The password is
 * stored sealed (AES-256-GCM under STREAMING_CREDENTIALS_KEY); only the sessions service can open it.
 */
export const streamingCredentialsTable = pgTable("streaming_host_credentials", {
  sessionId: uuid("session_id").primaryKey(),
  username: text("username").notNull(),
  sealedPassword: text("sealed_password").notNull(),
  createdAt: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
});
