CREATE TABLE "card_setups" (
	"id" uuid PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"checkout_session_id" text,
	"checkout_url" text,
	"status" text DEFAULT 'creating' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"completed_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "payment_methods" (
	"id" uuid PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"customer_id" text NOT NULL,
	"payment_method_id" text NOT NULL,
	"brand" text NOT NULL,
	"last4" text NOT NULL,
	"exp_month" integer NOT NULL,
	"exp_year" integer NOT NULL,
	"status" text DEFAULT 'active' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"removed_at" timestamp with time zone
);
--> statement-breakpoint
ALTER TABLE "metered_sessions" ADD COLUMN "low_credit_reason" text;--> statement-breakpoint
ALTER TABLE "topups" ADD COLUMN "origin" text DEFAULT 'checkout' NOT NULL;--> statement-breakpoint
ALTER TABLE "topups" ADD COLUMN "payment_method_ref" uuid;--> statement-breakpoint
ALTER TABLE "topups" ADD COLUMN "next_attempt_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "topups" ADD COLUMN "failure_message" text;--> statement-breakpoint
ALTER TABLE "wallets" ADD COLUMN "daily_spend_limit" bigint;--> statement-breakpoint
ALTER TABLE "wallets" ADD COLUMN "monthly_spend_limit" bigint;--> statement-breakpoint
ALTER TABLE "wallets" ADD COLUMN "spend_day" text;--> statement-breakpoint
ALTER TABLE "wallets" ADD COLUMN "spent_day" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "wallets" ADD COLUMN "spend_month" text;--> statement-breakpoint
ALTER TABLE "wallets" ADD COLUMN "spent_month" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "wallets" ADD COLUMN "auto_recharge_enabled" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "wallets" ADD COLUMN "auto_recharge_threshold" bigint;--> statement-breakpoint
ALTER TABLE "wallets" ADD COLUMN "auto_recharge_to" bigint;--> statement-breakpoint
ALTER TABLE "wallets" ADD COLUMN "auto_recharge_monthly_limit" bigint;--> statement-breakpoint
ALTER TABLE "wallets" ADD COLUMN "auto_recharge_failures" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "wallets" ADD COLUMN "auto_recharge_off_reason" text;--> statement-breakpoint
ALTER TABLE "wallets" ADD COLUMN "auto_recharge_skipped" text;--> statement-breakpoint
ALTER TABLE "wallets" ADD COLUMN "stripe_customer_id" text;--> statement-breakpoint
CREATE INDEX "card_setups_checkout_session_idx" ON "card_setups" USING btree ("checkout_session_id");--> statement-breakpoint
CREATE UNIQUE INDEX "payment_methods_one_active" ON "payment_methods" USING btree ("account_id") WHERE "payment_methods"."status" = 'active';--> statement-breakpoint
CREATE INDEX "payment_methods_detaching_idx" ON "payment_methods" USING btree ("created_at") WHERE "payment_methods"."status" = 'detaching';--> statement-breakpoint
CREATE UNIQUE INDEX "topups_one_recharge_in_flight" ON "topups" USING btree ("account_id") WHERE "topups"."origin" = 'auto_recharge' and "topups"."status" in ('creating', 'open');--> statement-breakpoint
CREATE INDEX "topups_recharges_idx" ON "topups" USING btree ("account_id","created_at") WHERE "topups"."origin" = 'auto_recharge';--> statement-breakpoint
ALTER TABLE "wallets" ADD CONSTRAINT "wallets_spent_non_negative" CHECK ("wallets"."spent_day" >= 0 and "wallets"."spent_month" >= 0);--> statement-breakpoint
-- Spending already charged this UTC day and month counts toward limits set from now on.
UPDATE "wallets" w SET
  "spend_day" = to_char(now() at time zone 'UTC', 'YYYY-MM-DD'),
  "spent_day" = greatest(0, coalesce((select -sum(l."amount") from "ledger_entries" l
     where l."account_id" = w."account_id" and l."kind" in ('usage', 'usage_refund', 'storage')
       and l."created_at" >= date_trunc('day', now() at time zone 'UTC') at time zone 'UTC'), 0)),
  "spend_month" = to_char(now() at time zone 'UTC', 'YYYY-MM'),
  "spent_month" = greatest(0, coalesce((select -sum(l."amount") from "ledger_entries" l
     where l."account_id" = w."account_id" and l."kind" in ('usage', 'usage_refund', 'storage')
       and l."created_at" >= date_trunc('month', now() at time zone 'UTC') at time zone 'UTC'), 0));
