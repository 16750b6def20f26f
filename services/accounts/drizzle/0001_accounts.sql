CREATE TABLE "accounts" (
	"identity_user_id" text PRIMARY KEY NOT NULL,
	"email" text,
	"preferences" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"deletion_requested_at" timestamp with time zone,
	"purge_at" timestamp with time zone,
	CONSTRAINT "accounts_deletion_pair" CHECK (("accounts"."deletion_requested_at" is null) = ("accounts"."purge_at" is null))
);
--> statement-breakpoint
CREATE TABLE "purged_accounts" (
	"identity_user_id" text PRIMARY KEY NOT NULL,
	"deletion_requested_at" timestamp with time zone NOT NULL,
	"purged_at" timestamp with time zone NOT NULL,
	"identity_disabled_at" timestamp with time zone,
	"disable_attempts" integer DEFAULT 0 NOT NULL,
	"next_disable_at" timestamp with time zone NOT NULL,
	"last_error" text
);
--> statement-breakpoint
CREATE INDEX "accounts_purge_due_idx" ON "accounts" USING btree ("purge_at") WHERE "accounts"."purge_at" is not null;--> statement-breakpoint
CREATE INDEX "purged_accounts_disable_due_idx" ON "purged_accounts" USING btree ("next_disable_at") WHERE "purged_accounts"."identity_disabled_at" is null;