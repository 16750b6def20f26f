import { createHmac, timingSafeEqual } from "node:crypto";
import { z } from "zod";

/**
 * What a streaming instance's host agent tells the platform, and how it proves it speaks for its own instance:
 * every report is signed with HMAC-SHA256 under the session's own agent key (handed to the instance at launch,
 * derived by the sessions service, never shared between instances). The sessions service refuses a report whose
 * signature, session or instance does not match. Nothing in a report moves money: it only says what the host saw.
 */
export const HOST_REPORT_VERSION = 1;

const isoDateTime = z.string().datetime({ offset: true });

const sha256Hex = z
  .string()
  .regex(/^[0-9a-f]{64}$/)
  .nullable();

export const hostReportSchema = z
  .object({
    /**
     * `session`: the instance serves a session (signed with that session's key). `standby`: a pre-booted pool
     * instance waiting to be assigned (signed with its pool slot's key).
     */
    kind: z.enum(["session", "standby"]),
    instanceId: z.string().min(1).max(64),
    sessionId: z.string().uuid().nullable(),
    /** The pool slot a standby instance was launched for; null for a session report. */
    poolId: z.string().uuid().nullable(),
    /** Grows with every report of the agent, across restarts (it starts from the wall clock). */
    seq: z.number().int().positive().max(Number.MAX_SAFE_INTEGER),
    sentAt: isoDateTime,
    /** When the host sampled what follows; older than sentAt when the report waited for the platform. */
    observedAt: isoDateTime,
    /** Streaming clients connected to the host's streaming ports (Moonlight sessions on Sunshine). */
    clientsConnected: z.number().int().min(0).max(64),
    /** Last user input on the host's display; null when the host has no display reader or saw none. */
    lastInputAt: isoDateTime.nullable(),
    /** Whether Sunshine's API answered the agent's last probe. */
    sunshineAnswers: z.boolean(),
    /** SHA-256 of the DER certificate Sunshine serves, lower-case hex; null while it has none. */
    certSha256: sha256Hex,
    /** A standby instance's assignment endpoint certificate (the platform pins it); null for a session report. */
    assignCertSha256: sha256Hex,
    agentVersion: z.string().min(1).max(32),
  })
  .strict()
  .refine(
    (r) =>
      r.kind === "session"
        ? r.sessionId !== null && r.poolId === null
        : r.poolId !== null && r.sessionId === null,
    {
      message: "a session report names its session, a standby report its pool slot, never both",
      path: ["kind"],
    },
  );

export type HostReport = z.infer<typeof hostReportSchema>;

export const signedHostReportSchema = z
  .object({
    v: z.literal(HOST_REPORT_VERSION),
    report: hostReportSchema,
    /** base64url HMAC-SHA256 of {@link canonicalReport} under the session's agent key. */
    sig: z.string().regex(/^[A-Za-z0-9_-]{43}$/),
  })
  .strict();

export type SignedHostReport = z.infer<typeof signedHostReportSchema>;

/** The bytes that are signed: every field in a fixed order, so key order on the wire does not matter. */
export function canonicalReport(report: HostReport): string {
  const ordered: HostReport = {
    kind: report.kind,
    instanceId: report.instanceId,
    sessionId: report.sessionId,
    poolId: report.poolId,
    seq: report.seq,
    sentAt: report.sentAt,
    observedAt: report.observedAt,
    clientsConnected: report.clientsConnected,
    lastInputAt: report.lastInputAt,
    sunshineAnswers: report.sunshineAnswers,
    certSha256: report.certSha256,
    assignCertSha256: report.assignCertSha256,
    agentVersion: report.agentVersion,
  };
  return `cgs-host-report-v${HOST_REPORT_VERSION}\n${JSON.stringify(ordered)}`;
}

function mac(agentKey: Buffer, report: HostReport): Buffer {
  return createHmac("sha256", agentKey).update(canonicalReport(report)).digest();
}

export function signHostReport(report: HostReport, agentKey: Buffer): SignedHostReport {
  return { v: HOST_REPORT_VERSION, report, sig: mac(agentKey, report).toString("base64url") };
}

/** True when `signed.sig` is the report's HMAC under `agentKey` (constant-time comparison). */
export function hasValidSignature(signed: SignedHostReport, agentKey: Buffer): boolean {
  const given = Buffer.from(signed.sig, "base64url");
  const expected = mac(agentKey, signed.report);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

export type ParsedHostReport = { ok: true; signed: SignedHostReport } | { ok: false; problem: string };

/** Parses a queue message body; the problem names the first bad field. */
export function parseSignedHostReport(body: string): ParsedHostReport {
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    return { ok: false, problem: "body is not JSON" };
  }
  const parsed = signedHostReportSchema.safeParse(json);
  if (parsed.success) return { ok: true, signed: parsed.data };
  const issue = parsed.error.issues[0];
  return { ok: false, problem: `${issue?.path.join(".") || "(root)"}: ${issue?.message ?? "invalid"}` };
}

/**
 * A certificate's SHA-256 fingerprint in the form reports carry (lower-case hex, no separators), from "AB:CD:…" as
 * Node prints it or bare hex; undefined when it is not a SHA-256 fingerprint.
 */
export function normalizeFingerprint(value: string | undefined): string | undefined {
  const hex = value?.replace(/[:\s]/g, "").toLowerCase();
  return hex && /^[0-9a-f]{64}$/.test(hex) ? hex : undefined;
}

/**
 * What the platform hands a standby pool instance when a session claims it (POST /v1/assign on the agent's
 * assignment endpoint): the same secrets a cold launch writes in its user data.
 */
export const assignmentSchema = z
  .object({
    sessionId: z.string().uuid(),
    /** The session's report-signing key, 32 bytes base64url. */
    agentKey: z.string().regex(/^[A-Za-z0-9_-]{43}$/),
    sunshineUsername: z.string().min(1).max(64),
    sunshinePassword: z.string().min(1).max(128),
    /** Single-use key the host joins the private network with, and the control server to join (null: Tailscale's). */
    privateNetworkKey: z.string().min(1).max(512).nullable(),
    privateNetworkLoginServer: z.string().url().max(512).nullable(),
    /** The account volume's id (the boot finds its device by it). */
    volumeId: z.string().min(1).max(64).nullable(),
  })
  .strict();

export type Assignment = z.infer<typeof assignmentSchema>;

export const ASSIGN_TIMESTAMP_HEADER = "x-cgs-timestamp";
export const ASSIGN_SIGNATURE_HEADER = "x-cgs-signature";
/** How far an assignment's timestamp may be from the host's clock: an older request is a replay. */
export const ASSIGN_MAX_SKEW_MS = 120_000;

/** base64url HMAC-SHA256 of an assignment body under the pool slot's key, bound to its timestamp. */
export function signAssignment(body: string, timestampMs: number, poolKey: Buffer): string {
  return createHmac("sha256", poolKey).update(`cgs-assign-v1\n${timestampMs}\n${body}`).digest("base64url");
}

export function assignmentSignatureValid(
  body: string,
  timestampMs: number,
  signature: string,
  poolKey: Buffer,
): boolean {
  const given = Buffer.from(signature, "base64url");
  const expected = Buffer.from(signAssignment(body, timestampMs, poolKey), "base64url");
  return given.length === expected.length && timingSafeEqual(given, expected);
}
