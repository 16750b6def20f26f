CREATE TABLE "idempotency_keys" (
	"account_id" text NOT NULL,
	"key" text NOT NULL,
	"response" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "idempotency_keys_account_id_key_pk" PRIMARY KEY("account_id","key")
);
--> statement-breakpoint
CREATE TABLE "pairing_pins" (
	"session_id" uuid PRIMARY KEY NOT NULL,
	"pin_digest" text NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "sessions" (
	"id" uuid PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"state" text NOT NULL,
	"region" text NOT NULL,
	"instance_id" text,
	"public_ip" text,
	"private_net_ip" text,
	"ready" boolean DEFAULT false NOT NULL,
	"message" text,
	"volume_id" text,
	"volume_attached" boolean DEFAULT false NOT NULL,
	"rate_per_minute" integer NOT NULL,
	"currency" text NOT NULL,
	"authorization_id" text,
	"idle_timeout_minutes" integer NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"started_at" timestamp with time zone,
	"running_at" timestamp with time zone,
	"stopped_at" timestamp with time zone,
	"stop_reason" text,
	"ended_at" timestamp with time zone,
	"last_activity_at" timestamp with time zone DEFAULT now() NOT NULL,
	"lease_until" timestamp with time zone,
	"lease_owner" text,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "sessions_state_check" CHECK ("sessions"."state" in ('starting', 'running', 'stopping', 'stopped', 'failed')),
	CONSTRAINT "sessions_rate_check" CHECK ("sessions"."rate_per_minute" >= 0)
);
--> statement-breakpoint
CREATE TABLE "volumes" (
	"account_id" text PRIMARY KEY NOT NULL,
	"volume_id" text NOT NULL,
	"region" text NOT NULL,
	"availability_zone" text NOT NULL,
	"size_gb" integer NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"delete_requested_at" timestamp with time zone
);
--> statement-breakpoint
CREATE UNIQUE INDEX "sessions_one_active_per_account" ON "sessions" USING btree ("account_id") WHERE "sessions"."state" in ('starting', 'running', 'stopping');--> statement-breakpoint
CREATE INDEX "sessions_account_created_idx" ON "sessions" USING btree ("account_id","created_at");--> statement-breakpoint
CREATE INDEX "sessions_active_lease_idx" ON "sessions" USING btree ("lease_until") WHERE "sessions"."state" in ('starting', 'running', 'stopping');