CREATE TABLE "private_network_keys" (
	"key_id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"kind" text NOT NULL,
	"network_tag" text,
	"expires_at" timestamp with time zone NOT NULL,
	"used_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "private_network_slots" (
	"slot" integer PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"leased_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "private_network_slots_account_id_unique" UNIQUE("account_id")
);
--> statement-breakpoint
CREATE INDEX "private_network_keys_account_idx" ON "private_network_keys" USING btree ("account_id","expires_at");