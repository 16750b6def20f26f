CREATE TABLE "devices" (
	"id" uuid PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"host_client_id" text NOT NULL,
	"name" text NOT NULL,
	"paired_at" timestamp with time zone NOT NULL,
	"last_used_at" timestamp with time zone,
	"removed_at" timestamp with time zone,
	"unpaired_at" timestamp with time zone
);
--> statement-breakpoint
CREATE UNIQUE INDEX "devices_account_host_client" ON "devices" USING btree ("account_id","host_client_id");--> statement-breakpoint
CREATE INDEX "devices_account_idx" ON "devices" USING btree ("account_id");