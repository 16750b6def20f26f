CREATE TABLE "pool_instances" (
	"id" uuid PRIMARY KEY NOT NULL,
	"region" text NOT NULL,
	"availability_zone" text NOT NULL,
	"instance_id" text,
	"state" text NOT NULL,
	"state_since" timestamp with time zone DEFAULT now() NOT NULL,
	"standby_at" timestamp with time zone,
	"report_seq" bigint DEFAULT 0 NOT NULL,
	"assign_cert_sha256" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "capacity" text DEFAULT 'cold' NOT NULL;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "pool_id" uuid;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "pool_assign_cert_sha256" text;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "assigned_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "ready_at" timestamp with time zone;--> statement-breakpoint
CREATE INDEX "pool_instances_state_idx" ON "pool_instances" USING btree ("availability_zone","state","state_since");