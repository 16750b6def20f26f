CREATE TABLE "disputes" (
	"dispute_id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"payment_intent_id" text NOT NULL,
	"amount" bigint NOT NULL,
	"currency" text NOT NULL,
	"status" text DEFAULT 'open' NOT NULL,
	"opened_at" timestamp with time zone DEFAULT now() NOT NULL,
	"closed_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "payment_reviews" (
	"id" uuid PRIMARY KEY NOT NULL,
	"stripe_event_id" text NOT NULL,
	"checkout_session_id" text,
	"account_id" text,
	"amount" bigint,
	"currency" text,
	"reason" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "topups" ADD COLUMN "payment_intent_id" text;--> statement-breakpoint
ALTER TABLE "topups" ADD COLUMN "refunded_amount" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "wallets" ADD COLUMN "shortfall" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
CREATE INDEX "disputes_open_idx" ON "disputes" USING btree ("account_id") WHERE "disputes"."status" = 'open';--> statement-breakpoint
CREATE INDEX "topups_payment_intent_idx" ON "topups" USING btree ("payment_intent_id");--> statement-breakpoint
ALTER TABLE "wallets" ADD CONSTRAINT "wallets_shortfall_non_negative" CHECK ("wallets"."shortfall" >= 0);