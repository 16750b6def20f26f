import { metrics } from "@cgs/shared";
import { hasValidSignature, parseSignedHostReport, type HostReport } from "@cgs/host-agent";
import { touchDevicesOfSessions } from "../data/device-repository";
import {
  applyHostObservations,
  findSessionsByIds,
  type HostObservation,
} from "../data/host-report-repository";
import type { SessionsDomainDeps } from "./session-deps";

export type ReportOutcome =
  | "applied"
  | "stale"
  | "not_active"
  | "refused_schema"
  | "refused_signature"
  | "refused_instance"
  | "refused_certificate";

/** The per-session key a host agent signs with (the credential vault derives it). */
export type AgentKeyLookup = (sessionId: string) => Buffer;

type Deps = Pick<SessionsDomainDeps, "db" | "clock" | "logger">;

/**
 * Takes a batch of host-agent reports off the queue. A report counts only when it is signed with its own
 * session's key and names the instance that session runs on; anything else is refused and changes nothing. What a
 * report can change is what the host saw (play, health, its certificate's fingerprint); it never moves money, and
 * a report for a session that has ended (or an older report than the newest applied) changes nothing either.
 */
export async function ingestHostReports(
  deps: Deps,
  agentKey: AgentKeyLookup,
  bodies: readonly string[],
): Promise<ReportOutcome[]> {
  const receivedAt = deps.clock.now();
  const outcomes: ReportOutcome[] = new Array<ReportOutcome>(bodies.length).fill("refused_schema");
  const verified = new Map<number, HostReport>();
  bodies.forEach((body, i) => {
    const parsed = parseSignedHostReport(body);
    if (!parsed.ok) {
      deps.logger.warn({ problem: parsed.problem }, "host report refused: malformed");
      return;
    }
    if (!hasValidSignature(parsed.signed, agentKey(parsed.signed.report.sessionId))) {
      outcomes[i] = "refused_signature";
      deps.logger.warn(
        { sessionId: parsed.signed.report.sessionId, instanceId: parsed.signed.report.instanceId },
        "host report refused: not signed with its session's key",
      );
      return;
    }
    verified.set(i, parsed.signed.report);
  });

  const sessions = new Map(
    (await findSessionsByIds(deps.db, [...new Set([...verified.values()].map((r) => r.sessionId))])).map(
      (s) => [s.id, s],
    ),
  );
  // The newest report of each session in this batch; an older one in the same batch is stale anyway.
  const newest = new Map<string, { index: number; report: HostReport }>();
  for (const [index, report] of verified) {
    const session = sessions.get(report.sessionId);
    if (!session || (session.state !== "starting" && session.state !== "running")) {
      outcomes[index] = "not_active";
      continue;
    }
    if (session.instanceId !== report.instanceId) {
      outcomes[index] = "refused_instance";
      deps.logger.warn(
        { sessionId: session.id, claimed: report.instanceId, actual: session.instanceId },
        "host report refused: it names another instance than its session's",
      );
      continue;
    }
    if (session.hostCertSha256 && report.certSha256 && session.hostCertSha256 !== report.certSha256) {
      outcomes[index] = "refused_certificate";
      deps.logger.error(
        { sessionId: session.id, instanceId: report.instanceId },
        "host report refused: its certificate differs from the one pinned at its first report",
      );
      continue;
    }
    outcomes[index] = "stale";
    const seen = newest.get(report.sessionId);
    if (!seen || seen.report.seq < report.seq) newest.set(report.sessionId, { index, report });
  }

  const observations: HostObservation[] = [...newest.values()].map(({ report }) => ({
    sessionId: report.sessionId,
    seq: report.seq,
    observedAt: new Date(report.observedAt),
    receivedAt,
    clientsConnected: report.clientsConnected,
    lastInputAt: report.lastInputAt ? new Date(report.lastInputAt) : null,
    sunshineAnswers: report.sunshineAnswers,
    certSha256: report.certSha256,
  }));
  const applied = await applyHostObservations(deps.db, observations);
  const streaming = observations.filter((o) => o.clientsConnected > 0 && applied.has(o.sessionId));
  await touchDevicesOfSessions(
    deps.db,
    streaming.map((o) => o.sessionId),
    receivedAt,
  );
  for (const { index, report } of newest.values())
    if (applied.has(report.sessionId)) outcomes[index] = "applied";
  for (const outcome of outcomes) metrics.hostReports.labels(outcome).inc();
  return outcomes;
}
