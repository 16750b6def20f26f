CREATE TABLE "region_capacity" (
	"region" text PRIMARY KEY NOT NULL,
	"full_until" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "sessions" DROP CONSTRAINT "sessions_state_check";--> statement-breakpoint
DROP INDEX "sessions_one_active_per_account";--> statement-breakpoint
-- An account has a volume per region it played in (a volume cannot leave its region).
ALTER TABLE "volumes" DROP CONSTRAINT "volumes_pkey";--> statement-breakpoint
ALTER TABLE "volumes" ADD CONSTRAINT "volumes_account_id_region_pk" PRIMARY KEY("account_id","region");--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "queued_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "queue_regions" text[];--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "queue_storage_gb" integer;--> statement-breakpoint
CREATE INDEX "sessions_queue_idx" ON "sessions" USING btree ("queued_at","id") WHERE "sessions"."state" = 'queued';--> statement-breakpoint
CREATE UNIQUE INDEX "sessions_one_active_per_account" ON "sessions" USING btree ("account_id") WHERE "sessions"."state" in ('queued', 'starting', 'running', 'stopping');--> statement-breakpoint
ALTER TABLE "sessions" ADD CONSTRAINT "sessions_state_check" CHECK ("sessions"."state" in ('queued', 'starting', 'running', 'stopping', 'stopped', 'failed'));