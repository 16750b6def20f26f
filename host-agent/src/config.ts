import { z } from "zod";
import { envInt, envUrl } from "@cgs/shared/dist/config";

const portList = z
  .string()
  .regex(/^\d+(,\d+)*$/, "must be comma-separated port numbers")
  .transform((v) => v.split(",").map(Number));
const portRange = z
  .string()
  .regex(/^\d+-\d+$/, "must be a range such as 47998-48010")
  .transform((v) => {
    const [from, to] = v.split("-").map(Number) as [number, number];
    return { from, to };
  });

/**
 * The host agent's environment: /etc/cgs/agent.env (written by cloud-init at launch: the session, its signing key,
 * the queue) and /etc/cgs/sunshine-credentials.env, through the systemd unit's EnvironmentFile lines.
 */
export const agentConfigSchema = z
  .object({
    CGS_SESSION_ID: z
      .string()
      .uuid()
      .optional()
      .describe("The session this instance serves (from the launch's user data, or its assignment)"),
    CGS_POOL_ID: z
      .string()
      .uuid()
      .optional()
      .describe(
        "The pool slot a pre-booted instance waits in until it is assigned (from its launch's user data)",
      ),
    CGS_AGENT_KEY: z
      .string()
      .regex(/^[A-Za-z0-9_-]{43}$/, "must be 32 bytes, base64url")
      .describe(
        "The session's (or the pool slot's) own signing key, 32 bytes base64url (from the user data)",
      ),
    CGS_REPORT_QUEUE_URL: envUrl().describe("SQS queue the reports are sent to"),
    AWS_REGION: z.string().min(1).default("us-east-1").describe("Region of the report queue"),
    AWS_ENDPOINT_URL: envUrl().optional().describe("AWS endpoint override (moto locally); unset on EC2"),
    CGS_INSTANCE_ID: z
      .string()
      .min(1)
      .optional()
      .describe("This instance's id; read from the instance metadata service (IMDSv2) when unset"),
    CGS_IMDS_ENDPOINT: envUrl().default("http://169.254.169.254").describe("Instance metadata service"),
    DISPLAY: z.string().min(1).default(":0").describe("X display whose input idle time is read"),
    XAUTHORITY: z.string().min(1).optional().describe("Xauthority file with the display's cookie"),
    SUNSHINE_API_URL: envUrl().default("https://127.0.0.1:47990").describe("Sunshine's web API on this host"),
    SUNSHINE_USERNAME: z.string().min(1).optional().describe("Sunshine API user (this instance's own)"),
    SUNSHINE_PASSWORD: z.string().min(1).optional().describe("Sunshine API password (this instance's own)"),
    SUNSHINE_CERT_FILE: z
      .string()
      .min(1)
      .default("/var/lib/cgs/sunshine/credentials/cacert.pem")
      .describe("Certificate Sunshine serves; its SHA-256 fingerprint is reported for pinning"),
    CGS_STREAM_STATE_FILE: z
      .string()
      .min(1)
      .default("/run/cgs/streams")
      .describe("Active stream count kept by Sunshine's prep-command hook (cgs-stream-state)"),
    CGS_STREAMING_TCP_PORTS: portList.default("47984,47989,48010").describe("Sunshine's streaming TCP ports"),
    CGS_STREAMING_UDP_PORTS: portRange.default("47998-48010").describe("Sunshine's streaming UDP ports"),
    CGS_REPORT_INTERVAL_MS: envInt(30_000, 1_000).describe("A report at least this often, in ms"),
    CGS_SAMPLE_INTERVAL_MS: envInt(2_000, 100).describe("How often the host is looked at, in ms"),
    CGS_INPUT_RESUMED_AFTER_MS: envInt(60_000, 1_000).describe(
      "Input after this long without any is reported at once, in ms",
    ),
    CGS_ASSIGN_PORT: z.coerce
      .number()
      .int()
      .min(1)
      .max(65535)
      .default(47991)
      .describe("A standby instance's assignment endpoint (HTTPS), reachable from the sessions service only"),
    CGS_ASSIGN_TLS_DIR: z
      .string()
      .min(1)
      .default("/var/lib/cgs-agent/tls")
      .describe("Where the assignment endpoint keeps its TLS key and certificate"),
    CGS_ASSIGN_SPOOL: z
      .string()
      .min(1)
      .default("/run/cgs/assign/assignment.json")
      .describe("Where an accepted assignment is written for the image's cgs-assign unit to install"),
  })
  .refine((c) => (c.CGS_SESSION_ID === undefined) !== (c.CGS_POOL_ID === undefined), {
    message: "exactly one of CGS_SESSION_ID (a session's instance) and CGS_POOL_ID (a standby pool instance)",
    path: ["CGS_SESSION_ID"],
  });

export type AgentConfig = z.output<typeof agentConfigSchema>;
