import { consumesQueue, queuesPublishedToBy } from "@cgs/shared";

/**
 * The deployables and what each one needs from AWS. IAM policies, queues, databases, secrets,
 * network policy and environment are all derived from this table, so a new dependency is one edit.
 */
export type DeployableName = "gateway" | "sessions" | "billing" | "accounts" | "auth-proxy";

/** Shared secrets in Secrets Manager (per-service database credentials are separate). */
export type SharedSecretName = "stripe" | "identityProvider" | "smtp" | "redis" | "streaming";

export interface Deployable {
  name: DeployableName;
  port: number;
  /** PostgreSQL database (and role) name on the shared RDS instance; undefined = no database. */
  database?: string;
  /** Owns an inbound SQS queue (with DLQ) it consumes: read off shared/src/queue/event-routes.ts. */
  consumesQueue: boolean;
  /** Services whose inbound queues this one sends events to: read off shared/src/queue/event-routes.ts. */
  publishesTo: DeployableName[];
  /** Secrets Manager entries delivered to the pods, with env var -> JSON key. */
  secrets: Partial<Record<SharedSecretName, Record<string, string>>>;
  /** Launches and stops the streaming instances. */
  managesStreamingInstances: boolean;
  /** In-cluster deployables it calls over HTTP (their NetworkPolicy admits it; nothing else but the gateway). */
  calls: DeployableName[];
  /** Ports it opens to addresses outside the cluster (AWS APIs, Stripe, IdP, SMTP). */
  internetPorts: number[];
}

type DeployableEntry = Omit<Deployable, "consumesQueue" | "publishesTo">;

const ENTRIES: readonly DeployableEntry[] = [
  {
    name: "gateway",
    port: 8080,
    secrets: { redis: { REDIS_URL: "url" } },
    managesStreamingInstances: false,
    calls: ["sessions", "billing", "accounts", "auth-proxy"],
    internetPorts: [443],
  },
  {
    name: "sessions",
    port: 8101,
    database: "sessions",
    secrets: {
      streaming: {
        PIN_HASH_SECRET: "pinHashSecret",
        STREAMING_CREDENTIALS_KEY: "streamingCredentialsKey",
        // TAILSCALE_API_KEY or HEADSCALE_API_KEY, as the stack's private network is (platform-values.ts).
        PRIVATE_NETWORK_API_KEY: "privateNetworkApiKey",
      },
    },
    managesStreamingInstances: true,
    // Start authorization and hold release (billing), account status and preferences (accounts).
    calls: ["billing", "accounts"],
    // AWS and Tailscale APIs (Headscale is in the cluster). The streaming instances' API and assignment ports come
    // from cgs:streaming (platform-values.ts, streamingHostPorts).
    internetPorts: [443],
  },
  {
    name: "billing",
    port: 8102,
    database: "billing",
    secrets: { stripe: { STRIPE_SECRET_KEY: "secretKey", STRIPE_WEBHOOK_SECRET: "webhookSecret" } },
    managesStreamingInstances: false,
    // Deletion-grace check before a top-up.
    calls: ["accounts"],
    internetPorts: [443],
  },
  {
    name: "accounts",
    port: 8103,
    database: "accounts",
    secrets: {},
    managesStreamingInstances: false,
    calls: [],
    internetPorts: [443],
  },
  {
    name: "auth-proxy",
    port: 8104,
    database: "auth_proxy",
    secrets: {
      identityProvider: { KEYCLOAK_ADMIN_CLIENT_SECRET: "adminClientSecret" },
      smtp: { SMTP_URL: "url" },
    },
    managesStreamingInstances: false,
    calls: [],
    internetPorts: [443, 465, 587],
  },
];

/** Event routing is not restated here: the services' own routing table decides queues and send rights. */
export const DEPLOYABLES: readonly Deployable[] = ENTRIES.map((entry) => ({
  ...entry,
  consumesQueue: consumesQueue(entry.name),
  publishesTo: queuesPublishedToBy(entry.name),
}));

/** SESSIONS_QUEUE_URL style names. */
export function envPrefix(name: string): string {
  return name.toUpperCase().replace(/-/g, "_");
}
