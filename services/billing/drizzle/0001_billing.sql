CREATE TABLE "holds" (
	"id" uuid PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"session_id" text NOT NULL,
	"amount" bigint NOT NULL,
	"remaining" bigint NOT NULL,
	"rate_per_minute" integer NOT NULL,
	"currency" text NOT NULL,
	"status" text DEFAULT 'active' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"released_at" timestamp with time zone,
	CONSTRAINT "holds_remaining_range" CHECK ("holds"."remaining" >= 0 and "holds"."remaining" <= "holds"."amount")
);
--> statement-breakpoint
CREATE TABLE "ledger_entries" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"kind" text NOT NULL,
	"reference" text NOT NULL,
	"amount" bigint NOT NULL,
	"currency" text NOT NULL,
	"balance_after" bigint NOT NULL,
	"details" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "ledger_entries_amount_not_zero" CHECK ("ledger_entries"."amount" <> 0),
	CONSTRAINT "ledger_entries_balance_after_non_negative" CHECK ("ledger_entries"."balance_after" >= 0)
);
--> statement-breakpoint
CREATE TABLE "metered_sessions" (
	"session_id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"rate_per_minute" integer NOT NULL,
	"currency" text NOT NULL,
	"started_at" timestamp with time zone NOT NULL,
	"stopped_at" timestamp with time zone,
	"charged_minutes" integer DEFAULT 0 NOT NULL,
	"next_minute_at" timestamp with time zone NOT NULL,
	"status" text DEFAULT 'running' NOT NULL,
	"exhausted_at" timestamp with time zone,
	"uncovered" bigint DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE TABLE "storage_periods" (
	"account_id" text NOT NULL,
	"period_start" timestamp with time zone NOT NULL,
	"period_end" timestamp with time zone NOT NULL,
	"tier" text NOT NULL,
	"amount" bigint NOT NULL,
	"status" text NOT NULL,
	"paid_at" timestamp with time zone,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "storage_periods_account_id_period_start_pk" PRIMARY KEY("account_id","period_start")
);
--> statement-breakpoint
CREATE TABLE "stripe_events" (
	"event_id" text PRIMARY KEY NOT NULL,
	"type" text NOT NULL,
	"outcome" text NOT NULL,
	"received_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "topups" (
	"id" uuid PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"amount" bigint NOT NULL,
	"currency" text NOT NULL,
	"client_key" text,
	"provider" text NOT NULL,
	"checkout_session_id" text,
	"checkout_url" text,
	"status" text DEFAULT 'creating' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"paid_at" timestamp with time zone,
	CONSTRAINT "topups_amount_positive" CHECK ("topups"."amount" > 0)
);
--> statement-breakpoint
CREATE TABLE "wallets" (
	"account_id" text PRIMARY KEY NOT NULL,
	"currency" text NOT NULL,
	"balance" bigint DEFAULT 0 NOT NULL,
	"held" bigint DEFAULT 0 NOT NULL,
	"storage_tier" text NOT NULL,
	"status" text DEFAULT 'open' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"closed_at" timestamp with time zone,
	CONSTRAINT "wallets_balance_non_negative" CHECK ("wallets"."balance" >= 0),
	CONSTRAINT "wallets_held_within_balance" CHECK ("wallets"."held" >= 0 and "wallets"."held" <= "wallets"."balance")
);
--> statement-breakpoint
CREATE UNIQUE INDEX "holds_session_key" ON "holds" USING btree ("session_id");--> statement-breakpoint
CREATE INDEX "holds_active_idx" ON "holds" USING btree ("created_at") WHERE "holds"."status" = 'active';--> statement-breakpoint
CREATE UNIQUE INDEX "ledger_entries_reference_key" ON "ledger_entries" USING btree ("reference");--> statement-breakpoint
CREATE INDEX "ledger_entries_account_idx" ON "ledger_entries" USING btree ("account_id","id");--> statement-breakpoint
CREATE INDEX "metered_sessions_due_idx" ON "metered_sessions" USING btree ("next_minute_at") WHERE "metered_sessions"."status" = 'running';--> statement-breakpoint
CREATE INDEX "metered_sessions_account_idx" ON "metered_sessions" USING btree ("account_id");--> statement-breakpoint
CREATE INDEX "storage_periods_unpaid_idx" ON "storage_periods" USING btree ("period_start") WHERE "storage_periods"."status" = 'unpaid';--> statement-breakpoint
CREATE UNIQUE INDEX "topups_client_key" ON "topups" USING btree ("account_id","client_key");--> statement-breakpoint
CREATE INDEX "topups_checkout_session_idx" ON "topups" USING btree ("checkout_session_id");