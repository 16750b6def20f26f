ALTER TABLE "sessions" ADD COLUMN "input_seen_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "device_absent_since" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "presence_checked_at" timestamp with time zone;