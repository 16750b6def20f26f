import { metrics } from "@cgs/shared";
import { hasValidSignature, parseSignedHostReport, type HostReport } from "@cgs/host-agent";
import { touchDevicesOfSessions } from "../data/device-repository";
import {
  applyHostObservations,
  findSessionsByIds,
  type HostObservation,
} from "../data/host-report-repository";
import { recordClaimedStandby, recordStandby } from "../data/pool-repository";
import type { SessionsDomainDeps } from "./session-deps";

type SessionReport = HostReport & { sessionId: string };

export type ReportOutcome =
  | "applied"
  | "stale"
  | "not_active"
  | "refused_schema"
  | "refused_signature"
  | "refused_instance"
  | "refused_certificate";

/** The keys host agents sign with (the credential vault derives them): a session's, or a pool slot's. */
export interface AgentKeyLookup {
  session(sessionId: string): Buffer;
  pool(poolId: string): Buffer;
}

type Deps = Pick<SessionsDomainDeps, "db" | "clock" | "logger" | "wake">;

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
  const verified = new Map<number, SessionReport>();
  const standby: { index: number; report: HostReport }[] = [];
  bodies.forEach((body, i) => {
    const parsed = parseSignedHostReport(body);
    if (!parsed.ok) {
      deps.logger.warn({ problem: parsed.problem }, "host report refused: malformed");
      return;
    }
    const { report } = parsed.signed;
    const key = report.poolId ? agentKey.pool(report.poolId) : agentKey.session(report.sessionId!);
    if (!hasValidSignature(parsed.signed, key)) {
      outcomes[i] = "refused_signature";
      deps.logger.warn(
        { sessionId: parsed.signed.report.sessionId, instanceId: parsed.signed.report.instanceId },
        "host report refused: not signed with its session's key",
      );
      return;
    }
    if (report.kind === "standby") standby.push({ index: i, report });
    else verified.set(i, { ...report, sessionId: report.sessionId! });
  });
  for (const { index, report } of standby) outcomes[index] = await applyStandby(deps, report, receivedAt);

  const sessions = new Map(
    (await findSessionsByIds(deps.db, [...new Set([...verified.values()].map((r) => r.sessionId))])).map(
      (s) => [s.id, s],
    ),
  );
  // The newest report of each session in this batch; an older one in the same batch is stale anyway.
  const newest = new Map<string, { index: number; report: SessionReport }>();
  for (const [index, report] of verified) {
    const session = sessions.get(report.sessionId!);
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
    const seen = newest.get(report.sessionId!);
    if (!seen || seen.report.seq < report.seq) newest.set(report.sessionId!, { index, report });
  }

  const observations: HostObservation[] = [...newest.values()].map(({ report }) => ({
    sessionId: report.sessionId!,
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
  // Sunshine answers on a host whose player still waits: the reconciler confirms it ready now, not next interval.
  if (
    [...newest.values()].some(
      ({ report }) =>
        report.sunshineAnswers && applied.has(report.sessionId) && !sessions.get(report.sessionId)?.readyAt,
    )
  )
    deps.wake.reconciler();
  for (const outcome of outcomes) metrics.hostReports.labels(outcome).inc();
  return outcomes;
}

/**
 * A pre-booted pool instance says it is up and waiting: the pool keeper may keep it hot or park it, and a start may
 * claim it; or a session claimed it (a warm instance it woke) and may now assign it. A report for a slot that is
 * gone (retired) or naming another instance changes nothing.
 */
async function applyStandby(deps: Deps, report: HostReport, at: Date): Promise<ReportOutcome> {
  const poolId = report.poolId!;
  const slot = {
    poolId,
    instanceId: report.instanceId,
    seq: report.seq,
    assignCertSha256: report.assignCertSha256,
  };
  if (await recordStandby(deps.db, { ...slot, at })) return "applied";
  if (!(await recordClaimedStandby(deps.db, { poolId, instanceId: report.instanceId, at })))
    return "not_active";
  // The woken machine of a waiting player: the reconciler assigns it now.
  deps.wake.reconciler();
  return "applied";
}
