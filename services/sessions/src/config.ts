import {
  commonServiceEnv,
  databaseEnv,
  envBoolean,
  envInt,
  envList,
  envPort,
  envUrl,
  hostReportQueueName,
  queueEnv,
} from "@cgs/shared";
import { z } from "zod";

const DEV_PIN_SECRET = "local-development-pin-secret-change-me";

const regionId = z.string().regex(/^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$/, "must be a region id such as eu-west-1");

/** One region sessions run in: its own streaming fleet (EC2 settings) and latency beacon. */
const regionSchema = z
  .object({
    id: regionId,
    name: z.string().min(1).max(60).optional(),
    beaconUrl: z.string().url().optional(),
    availabilityZone: z.string().min(1).optional(),
    ec2: z
      .object({
        launchTemplate: z.string().min(1).optional(),
        amiId: z.string().min(1).optional(),
        subnetId: z.string().min(1).optional(),
        securityGroupIds: z.array(z.string().min(1)).optional(),
      })
      .strict()
      .optional(),
    simulator: z
      .object({
        latencyMs: z.number().int().min(0).max(10_000).default(0),
        capacity: z.number().int().min(0).optional(),
      })
      .strict()
      .optional(),
  })
  .strict();

export type RegionConfig = z.output<typeof regionSchema>;

const regionsEnv = z
  .string()
  .optional()
  .transform((raw, ctx) => {
    if (raw === undefined) return undefined;
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      ctx.addIssue({ code: "custom", message: "must be a JSON array of regions" });
      return z.NEVER;
    }
    const result = z.array(regionSchema).min(1).max(16).safeParse(parsed);
    if (!result.success) {
      for (const issue of result.error.issues) {
        ctx.addIssue({ code: "custom", message: `${issue.path.join(".") || "(value)"}: ${issue.message}` });
      }
      return z.NEVER;
    }
    const ids = result.data.map((r) => r.id);
    const repeated = ids.find((id, i) => ids.indexOf(id) !== i);
    if (repeated) {
      ctx.addIssue({ code: "custom", message: `region ${repeated} is listed twice` });
      return z.NEVER;
    }
    return result.data;
  });

export const sessionsConfigSchema = z
  .object({
    ...commonServiceEnv(8101),
    ...databaseEnv(),
    ...queueEnv("cgs-sessions"),
    ACCOUNTS_URL: envUrl()
      .default("http://127.0.0.1:8103")
      .describe("Base URL of the accounts service (internal account status and preferences)"),
    BILLING_URL: envUrl()
      .default("http://127.0.0.1:8102")
      .describe("Base URL of the billing service (start authorization and hold release)"),
    INTERNAL_CALL_TIMEOUT_MS: envInt(3_000, 1).describe(
      "Timeout of a synchronous call to accounts or billing, in ms; past it start answers 503 UNAVAILABLE",
    ),
    SESSION_RATE_PER_MINUTE: envInt(10, 1).describe(
      "Price of a running session per minute, in minor units (cents) of SESSION_CURRENCY",
    ),
    SESSION_CURRENCY: z
      .string()
      .regex(/^[A-Z]{3}$/, "must be an ISO 4217 code in upper case")
      .default("USD")
      .describe("Currency of SESSION_RATE_PER_MINUTE"),
    SESSION_START_TIMEOUT_MS: envInt(600_000, 1).describe(
      "A session still starting after this long is failed and its instance terminated, in ms",
    ),
    SESSION_IDLE_TIMEOUT_MINUTES: envInt(15, 1).describe(
      "Idle timeout when the account's preferences carry none, in minutes",
    ),
    SESSION_MAX_LENGTH_MINUTES: envInt(720, 1).describe(
      "Maximum session length when the account's preferences carry none, in minutes",
    ),
    IDLE_WARNING_MINUTES: envInt(5, 1).describe(
      "How long before an idle stop poll warns (at most half the idle timeout), in minutes",
    ),
    MAX_LENGTH_WARNING_MINUTES: envInt(10, 1).describe(
      "How long before a maximum-length stop poll warns, in minutes",
    ),
    SESSION_EXTENSION_MINUTES: envInt(60, 1).describe(
      "Keep playing during a maximum-length warning postpones the stop by this much, in minutes",
    ),
    SESSION_MINUTE_MS: envInt(60_000, 10).describe(
      "Length of a minute of the session clock (idle timeout, warnings, maximum length), in ms: 60000 in every real deployment, shorter only in tests",
    ),
    HOST_REPORT_QUEUE_NAME: z
      .string()
      .min(1)
      .default(hostReportQueueName)
      .describe("SQS queue the streaming hosts' agents report to (its DLQ is <name>-dlq)"),
    HOST_REPORT_STALE_MS: envInt(90_000, 1).describe(
      "A ready session whose host agent has not reported for this long is warned about, in ms",
    ),
    HOST_LOST_AFTER_MS: envInt(300_000, 1).describe(
      "A ready session whose host agent has not reported for this long ends as instance_lost, charged up to its last report, in ms",
    ),
    IDLE_SWEEP_INTERVAL_MS: envInt(10_000, 10).describe(
      "Pause between play sweeps (warnings; idle, maximum-length and lost-host stops), in ms",
    ),
    RECONCILER_INTERVAL_MS: envInt(5_000, 10).describe("Pause between reconciler ticks, in ms"),
    ORPHAN_SWEEP_INTERVAL_MS: envInt(60_000, 10).describe(
      "Pause between sweeps that terminate tagged instances with no active session, in ms",
    ),
    RECONCILER_BATCH_SIZE: envInt(1_000, 1).describe(
      "Sessions one replica claims per reconciler tick (rows leased, then checked against the cloud in batches)",
    ),
    RECONCILER_DESCRIBE_GRACE_MS: envInt(30_000, 0).describe(
      "A launched instance absent from DescribeInstances is only treated as lost after this long, in ms",
    ),
    RECONCILER_LEASE_MS: envInt(60_000, 100).describe(
      "How long a reconciler claim on a session lasts before another replica may take it, in ms",
    ),
    CLOUD_PROVIDER: z
      .enum(["simulator", "ec2"])
      .optional()
      .describe(
        "Where instances and volumes run: simulator (in-process; the default outside production) or ec2",
      ),
    CLOUD_REGION: z
      .string()
      .min(1)
      .optional()
      .describe("Region instances and volumes are created in; defaults to AWS_REGION"),
    REGIONS: regionsEnv.describe(
      'Regions sessions run in, in the order a start without measurements tries them: a JSON array of {"id", "name", "beaconUrl", "availabilityZone", "ec2": {"launchTemplate", "amiId", "subnetId", "securityGroupIds"}, "simulator": {"latencyMs", "capacity"}}; unset: CLOUD_REGION alone. EC2 fields default to the EC2_* variables; a simulated region\'s beacon defaults to the simulator\'s beacon listener',
    ),
    AUTO_MAX_RTT_MS: envInt(150, 1).describe(
      "A start with region auto and no maxRttMs accepts regions measured at most this round trip, in ms",
    ),
    QUEUE_MAX_WAIT_MINUTES: envInt(60, 1).describe(
      "A queued session that found no capacity for this long fails with a message (no charge), in minutes",
    ),
    QUEUE_TYPICAL_INTERVAL_SECONDS: envInt(120, 1).describe(
      "Poll's queue estimate per place ahead until enough machines freed in the region were measured, in seconds",
    ),
    QUEUE_INTERVAL_MS: envInt(2_000, 10).describe(
      "Pause between passes that give freed capacity to the first queued session of each region, in ms",
    ),
    SIMULATOR_BEACON_PORT: envPort(8108).describe(
      "Cloud simulator: port of the latency beacons of simulated regions (each answers after its region's latencyMs; 0 picks a free port)",
    ),
    CLOUD_AVAILABILITY_ZONE: z
      .string()
      .min(1)
      .optional()
      .describe(
        "Availability zone of new account volumes (instances follow their volume); default <region>a",
      ),
    CLOUD_CAPACITY_RETRY_AFTER_SECONDS: envInt(30, 1).describe(
      "Retry-After sent with 503 CLOUD_CAPACITY, in seconds",
    ),
    CLOUD_TAG_PREFIX: z
      .string()
      .min(1)
      .default("cgs")
      .describe("Prefix of the tags put on instances and volumes (<prefix>:session-id, <prefix>:account-id)"),
    EC2_LAUNCH_TEMPLATE: z
      .string()
      .min(1)
      .optional()
      .describe(
        "EC2 launch template id (lt-...) or name; when unset EC2_AMI_ID and EC2_INSTANCE_TYPE are used",
      ),
    EC2_LAUNCH_TEMPLATE_VERSION: z
      .string()
      .min(1)
      .default("$Default")
      .describe("Launch template version ($Default, $Latest or a number)"),
    EC2_AMI_ID: z.string().min(1).optional().describe("AMI of the streaming host when no launch template"),
    EC2_INSTANCE_TYPE: z
      .string()
      .min(1)
      .default("g4dn.xlarge")
      .describe("Instance type when no launch template"),
    EC2_SUBNET_ID: z.string().min(1).optional().describe("Subnet for instances (optional)"),
    EC2_SECURITY_GROUP_IDS: envList([]).describe("Security groups for instances, comma-separated (optional)"),
    EC2_VOLUME_TYPE: z.string().min(1).default("gp3").describe("EBS volume type of account volumes"),
    EC2_VOLUME_DEVICE: z
      .string()
      .min(1)
      .default("/dev/sdf")
      .describe("Device name the account volume is attached as"),
    EC2_PAGE_SIZE: envInt(1_000, 5).describe("MaxResults of each DescribeInstances page (5-1000)"),
    POOL_HOT_MIN: envInt(0, 0).describe("Capacity pool: fewest running (hot) pre-booted instances kept"),
    POOL_HOT_MAX: envInt(0, 0).describe(
      "Capacity pool: most running (hot) pre-booted instances kept (0: none)",
    ),
    POOL_WARM_MIN: envInt(0, 0).describe("Capacity pool: fewest stopped (warm) pre-booted instances kept"),
    POOL_WARM_MAX: envInt(0, 0).describe(
      "Capacity pool: most stopped (warm) pre-booted instances kept (0: none)",
    ),
    POOL_HOT_COVER_MINUTES: envInt(2, 0).describe(
      "Capacity pool: the hot target is the starts expected in this many minutes (starts per hour × minutes / 60), within its min and max",
    ),
    POOL_WARM_COVER_MINUTES: envInt(10, 0).describe(
      "Capacity pool: the warm target is the starts expected in this many minutes, within its min and max",
    ),
    POOL_SHRINK_AFTER_MINUTES: envInt(15, 0).describe(
      "Capacity pool: instances above target are parked or terminated only after the surplus lasted this long",
    ),
    POOL_LAUNCH_TIMEOUT_MINUTES: envInt(20, 1).describe(
      "Capacity pool: an instance that has not reported standby this long after its launch or start is terminated",
    ),
    POOL_INTERVAL_MS: envInt(10_000, 10).describe("Pause between capacity pool ticks, in ms"),
    POOL_CHANGES_PER_TICK: envInt(5, 1).describe(
      "Capacity pool: most launches, starts, stops and terminations one tick asks of the cloud",
    ),
    POOL_RUNNING_HOUR_COST: envInt(53, 0).describe(
      "Capacity pool: an idle running instance's cost per hour, minor units of SESSION_CURRENCY (the cost metric)",
    ),
    POOL_STOPPED_HOUR_COST: envInt(1, 0).describe(
      "Capacity pool: an idle stopped instance's cost per hour (its root volume), minor units (the cost metric)",
    ),
    START_ESTIMATE_HOT_SECONDS: z.coerce
      .number()
      .int()
      .min(1)
      .optional()
      .describe(
        "Poll's start estimate on a hot instance until enough starts were measured, in seconds (default 10 on EC2; on the simulator, its own delays)",
      ),
    START_ESTIMATE_WARM_SECONDS: z.coerce
      .number()
      .int()
      .min(1)
      .optional()
      .describe(
        "Poll's start estimate on a warm instance until enough starts were measured, in seconds (default 40 on EC2; on the simulator, its own delays)",
      ),
    START_ESTIMATE_COLD_SECONDS: z.coerce
      .number()
      .int()
      .min(1)
      .optional()
      .describe(
        "Poll's start estimate on a new instance until enough starts were measured, in seconds (default 240 on EC2; on the simulator, its own delays)",
      ),
    HOST_ASSIGN_PORT: envInt(47991, 1).describe(
      "Port of a pool instance's assignment endpoint (its host agent, HTTPS), called at its private IP",
    ),
    SIMULATOR_BOOT_DELAY_MS: envInt(3_000, 0).describe(
      "Cloud simulator: time from launch until an instance is running, in ms",
    ),
    SIMULATOR_HOST_READY_DELAY_MS: envInt(2_000, 0).describe(
      "Streaming-host simulator: time from an instance running (or a pool instance assigned) until its streaming host answers, in ms",
    ),
    SIMULATOR_START_DELAY_MS: envInt(2_000, 0).describe(
      "Cloud simulator: time from starting a stopped instance until it is running, in ms",
    ),
    SIMULATOR_STOP_DELAY_MS: envInt(1_000, 0).describe(
      "Cloud simulator: time from stopping an instance until it is stopped, in ms",
    ),
    SIMULATOR_ATTACH_DELAY_MS: envInt(500, 0).describe(
      "Cloud simulator: time from attaching a volume until the instance sees it, in ms",
    ),
    SIMULATOR_DETACH_DELAY_MS: envInt(1_000, 0).describe(
      "Cloud simulator: time a terminated instance's volume stays in use before another instance can attach it, in ms",
    ),
    SIMULATOR_JITTER: z.coerce
      .number()
      .min(0)
      .max(0.9)
      .default(0)
      .describe("Cloud simulator: each instance's delays are scaled by a factor drawn from 1 ± this"),
    SIMULATOR_PAGE_SIZE: envInt(1_000, 1).describe("Cloud simulator: instances per describe page"),
    SIMULATOR_HOST_AGENTS: envBoolean(true).describe(
      "Cloud simulator: run the host agent's real code on every simulated instance, reporting to HOST_REPORT_QUEUE_NAME",
    ),
    SIMULATOR_AGENT_REPORT_INTERVAL_MS: envInt(30_000, 100).describe(
      "Cloud simulator: how often a simulated host's agent reports when nothing changes, in ms",
    ),
    SIMULATOR_CONTROL: envBoolean(true).describe(
      "Expose /internal/v1/simulator/* (fault injection) when the simulator is selected and NODE_ENV is not production",
    ),
    STREAMING_HOST: z
      .enum(["simulator", "sunshine"])
      .optional()
      .describe(
        "Streaming host adapter: simulator (in-process; the default outside production) or sunshine (HTTP API on each instance)",
      ),
    STREAMING_HOST_URL_TEMPLATE: z
      .string()
      .min(1)
      .default("https://{ip}:47990")
      .describe(
        "Base URL of an instance's Sunshine API; {ip} is replaced by the instance's private-network IP",
      ),
    STREAMING_CREDENTIALS_KEY: z
      .string()
      .regex(/^[A-Za-z0-9+/]{43}=$/, "must be 32 bytes, base64")
      .optional()
      .describe(
        "Key (32 bytes, base64) sealing each instance's own Sunshine API credentials at rest; required in production",
      ),
    STREAMING_PORT: envInt(47989, 1).describe("Port the streaming client connects to (answered by connect)"),
    PAIRING_PIN_TTL_SECONDS: envInt(120, 10).describe("How long a pairing PIN is valid, in seconds"),
    PAIRING_RETRY_ATTEMPTS: envInt(5, 1).describe(
      "Attempts to hand a PIN to a streaming host that is coming up",
    ),
    PAIRING_RETRY_DELAY_MS: envInt(1_000, 0).describe("Pause between those attempts, in ms"),
    PIN_HASH_SECRET: z
      .string()
      .min(16)
      .optional()
      .describe("HMAC key for stored pairing-PIN digests (required in production)"),
    PRIVATE_NETWORK: z
      .enum(["simulator", "tailscale", "headscale"])
      .optional()
      .describe(
        "Private-network adapter: simulator (in-process; the default outside production), headscale (self-hosted control plane) or tailscale (hosted, API v2)",
      ),
    HEADSCALE_URL: envUrl()
      .optional()
      .describe(
        "Headscale: base URL of its REST API as this service reaches it (e.g. http://headscale:8080)",
      ),
    HEADSCALE_API_KEY: z
      .string()
      .default("")
      .describe("Headscale: API key (`headscale apikeys create`); required with headscale"),
    HEADSCALE_LOGIN_SERVER: envUrl()
      .optional()
      .describe(
        "Headscale: public URL devices and hosts log in to (`tailscale up --login-server`), returned with each key; default HEADSCALE_URL",
      ),
    TAILSCALE_API_URL: envUrl().default("https://api.tailscale.com").describe("Tailscale API base URL"),
    TAILSCALE_TAILNET: z
      .string()
      .min(1)
      .default("-")
      .describe('Tailnet name ("-" is the API key\'s default tailnet)'),
    TAILSCALE_API_KEY: z.string().default("").describe("Tailscale API access token"),
    TAILSCALE_SLOTS: envInt(500, 2).describe(
      "Tailscale: slot tags in the tailnet policy infra writes (the most accounts playing at once); must match it",
    ),
    TAILSCALE_DEVICES_CACHE_MS: envInt(15_000, 0).describe(
      "Tailscale: one device listing answers every account's presence question for this long, in ms",
    ),
    VPN_KEY_TAGS: envList(["tag:cgs-client"]).describe(
      "Tailscale: ACL tags of a player device's key, beside its account's slot tag",
    ),
    VPN_HOST_TAG: z
      .string()
      .regex(/^tag:[a-z0-9-]+$/)
      .default("tag:cgs-host")
      .describe("Tailscale: ACL tag of a streaming host's key, beside its account's slot tag"),
    VPN_HOST_KEY_TTL_SECONDS: envInt(3600, 300).describe(
      "Lifetime of the single-use key a launched streaming host joins the private network with, in seconds",
    ),
    VPN_KEY_MAX_LIVE: envInt(3, 1).describe(
      "Most unused, unexpired private-network keys one account may hold; past it vpn-key answers 429",
    ),
    VPN_KEY_TTL_SECONDS: envInt(600, 60).describe(
      "Lifetime of an ephemeral private-network auth key, in seconds",
    ),
    IDEMPOTENCY_TTL_HOURS: envInt(24, 1).describe(
      "How long a start's Idempotency-Key is remembered, in hours",
    ),
  })
  .transform((c, ctx) => {
    const region = c.CLOUD_REGION ?? c.AWS_REGION;
    for (const kind of ["HOT", "WARM"] as const) {
      if (c[`POOL_${kind}_MIN`] > c[`POOL_${kind}_MAX`]) {
        ctx.addIssue({
          code: "custom",
          path: [`POOL_${kind}_MIN`],
          message: `must not exceed POOL_${kind}_MAX (${c[`POOL_${kind}_MAX`]})`,
        });
      }
    }
    if (c.PRIVATE_NETWORK === "headscale") {
      if (!c.HEADSCALE_URL) {
        ctx.addIssue({ code: "custom", path: ["HEADSCALE_URL"], message: "is required with headscale" });
      }
      if (!c.HEADSCALE_API_KEY) {
        ctx.addIssue({ code: "custom", path: ["HEADSCALE_API_KEY"], message: "is required with headscale" });
      }
    }
    if (c.NODE_ENV === "production") {
      // A forgotten variable must not quietly run a production deployment on simulators.
      for (const key of ["CLOUD_PROVIDER", "STREAMING_HOST", "PRIVATE_NETWORK"] as const) {
        if (!c[key])
          ctx.addIssue({ code: "custom", path: [key], message: "must be set explicitly in production" });
      }
      if (c.PRIVATE_NETWORK === "tailscale" && !c.TAILSCALE_API_KEY) {
        ctx.addIssue({ code: "custom", path: ["TAILSCALE_API_KEY"], message: "is required with tailscale" });
      }
      if (!c.STREAMING_CREDENTIALS_KEY) {
        ctx.addIssue({
          code: "custom",
          path: ["STREAMING_CREDENTIALS_KEY"],
          message: "is required in production",
        });
      }
      if (!c.PIN_HASH_SECRET) {
        ctx.addIssue({ code: "custom", path: ["PIN_HASH_SECRET"], message: "is required in production" });
      }
      if (c.CLOUD_PROVIDER === "ec2" && !c.EC2_LAUNCH_TEMPLATE && !c.EC2_AMI_ID) {
        ctx.addIssue({
          code: "custom",
          path: ["EC2_LAUNCH_TEMPLATE"],
          message: "EC2_LAUNCH_TEMPLATE or EC2_AMI_ID is required",
        });
      }
    }
    const zone = c.CLOUD_AVAILABILITY_ZONE ?? `${region}a`;
    const regions: RegionConfig[] = c.REGIONS ?? [{ id: region, availabilityZone: zone }];
    return {
      ...c,
      REGIONS: regions.map((r) => ({
        ...r,
        name: r.name ?? r.id,
        availabilityZone: r.availabilityZone ?? (r.id === region ? zone : `${r.id}a`),
      })),
      CLOUD_PROVIDER: c.CLOUD_PROVIDER ?? "simulator",
      STREAMING_HOST: c.STREAMING_HOST ?? "simulator",
      PRIVATE_NETWORK: c.PRIVATE_NETWORK ?? "simulator",
      CLOUD_REGION: region,
      CLOUD_AVAILABILITY_ZONE: c.CLOUD_AVAILABILITY_ZONE ?? `${region}a`,
      PIN_HASH_SECRET: c.PIN_HASH_SECRET ?? DEV_PIN_SECRET,
    };
  });

export type SessionsConfig = z.output<typeof sessionsConfigSchema>;
