CREATE TABLE "streaming_host_credentials" (
	"session_id" uuid PRIMARY KEY NOT NULL,
	"username" text NOT NULL,
	"sealed_password" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
