ALTER TABLE "sessions" ADD COLUMN "max_length_minutes" integer DEFAULT 720 NOT NULL;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "length_extended_minutes" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "play_seen_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "kept_alive_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "clients_connected" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "host_seen_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "host_seq" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "sunshine_answers" boolean;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "host_cert_sha256" text;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "credits_stop_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "credits_forecast_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "warned_kind" text;--> statement-breakpoint
-- Sessions running across the upgrade keep their idle clock: the last API activity is the last play we know of.
UPDATE "sessions" SET "play_seen_at" = greatest("running_at", "last_activity_at"), "host_seen_at" = now() WHERE "state" = 'running';--> statement-breakpoint
-- Stop reasons take the names poll answers with.
UPDATE "sessions" SET "stop_reason" = 'idle' WHERE "stop_reason" = 'idle_timeout';--> statement-breakpoint
UPDATE "sessions" SET "stop_reason" = 'account_deletion' WHERE "stop_reason" = 'account_purged';
