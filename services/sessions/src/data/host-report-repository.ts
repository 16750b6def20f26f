import { inArray, sql } from "drizzle-orm";
import type { SessionsDb } from "./session-repository";
import { sessionsTable, type SessionRow } from "./session-tables";

export async function findSessionsByIds(db: SessionsDb, ids: readonly string[]): Promise<SessionRow[]> {
  if (ids.length === 0) return [];
  return db
    .select()
    .from(sessionsTable)
    .where(inArray(sessionsTable.id, [...ids]));
}

/** One report to apply: what the host saw, its sequence number, and when the platform received it. */
export interface HostObservation {
  sessionId: string;
  seq: number;
  observedAt: Date;
  receivedAt: Date;
  clientsConnected: number;
  lastInputAt: Date | null;
  sunshineAnswers: boolean;
  certSha256: string | null;
}

/**
 * Applies a batch of reports (at most one per session) in one statement. A report older than the newest one
 * applied (seq) changes nothing, nor one for a session that is no longer starting or running. Times the host
 * gives are never taken as later than their receipt. Play moves forward only: a streaming client connected at the
 * observation, or input at lastInputAt. The first certificate fingerprint is kept (pinned). Returns the ids applied.
 */
export async function applyHostObservations(
  db: SessionsDb,
  batch: readonly HostObservation[],
): Promise<Set<string>> {
  if (batch.length === 0) return new Set();
  const iso = (d: Date | null) => (d ? d.toISOString() : null);
  const result = await db.execute<{ id: string }>(sql`
    update ${sessionsTable} s set
      host_seq = r.seq,
      host_seen_at = least(r.observed_at, r.received_at),
      clients_connected = r.clients,
      sunshine_answers = r.sunshine,
      host_cert_sha256 = coalesce(s.host_cert_sha256, r.cert),
      play_seen_at = greatest(
        s.play_seen_at,
        case when r.clients > 0 then least(r.observed_at, r.received_at) end,
        least(r.last_input_at, r.received_at)
      ),
      input_seen_at = greatest(s.input_seen_at, least(r.last_input_at, r.received_at)),
      updated_at = now()
    from unnest(
      ${sql.param(batch.map((o) => o.sessionId))}::uuid[],
      ${sql.param(batch.map((o) => o.seq))}::bigint[],
      ${sql.param(batch.map((o) => o.observedAt.toISOString()))}::timestamptz[],
      ${sql.param(batch.map((o) => o.receivedAt.toISOString()))}::timestamptz[],
      ${sql.param(batch.map((o) => o.clientsConnected))}::int[],
      ${sql.param(batch.map((o) => iso(o.lastInputAt)))}::timestamptz[],
      ${sql.param(batch.map((o) => o.sunshineAnswers))}::boolean[],
      ${sql.param(batch.map((o) => o.certSha256))}::text[]
    ) as r(id, seq, observed_at, received_at, clients, last_input_at, sunshine, cert)
    where s.id = r.id and s.host_seq < r.seq and s.state in ('starting', 'running')
    returning s.id
  `);
  return new Set(result.rows.map((r) => r.id));
}
