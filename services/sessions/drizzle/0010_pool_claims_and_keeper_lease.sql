CREATE TABLE "pool_keeper_leases" (
	"availability_zone" text PRIMARY KEY NOT NULL,
	"owner" text NOT NULL,
	"expires_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "pool_standby_at" timestamp with time zone;