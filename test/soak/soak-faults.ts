import type { SoakPlatform, ServiceName } from "./soak-platform";

/** A small seeded generator (mulberry32): the same seed gives the same schedule and the same players' choices. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

export const FAULT_KINDS = [
  "kill:sessions",
  "kill:billing",
  "kill:accounts",
  "kill:auth-proxy",
  "kill:gateway",
  "postgres:crash",
  "postgres:cut-connections",
  "redis:kill",
  "sqs:outage",
  "idp:outage",
  "instance:lose",
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export interface PlannedFault {
  kind: FaultKind;
  /** When to inject it, from the start of the load (a fault that is still healing delays the next one). */
  atMs: number;
  /** How long the peer stays down before it is brought back (kills and cuts heal on their own). */
  holdMs: number;
  /** A second fault injected at the same moment (after the first round): players meet outages together. */
  with?: FaultKind;
}

/**
 * The schedule a seed gives: every kind once in a seeded order, then seeded kinds until the load ends, spaced
 * by seeded gaps. Printed before the run; the same seed and duration give the same schedule.
 */
export function faultSchedule(seed: number, durationMs: number): PlannedFault[] {
  const random = seededRandom(seed ^ 0x5eed);
  const kinds = [...FAULT_KINDS];
  for (let i = kinds.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [kinds[i], kinds[j]] = [kinds[j]!, kinds[i]!];
  }
  const schedule: PlannedFault[] = [];
  // The first faults meet players already playing; the last ends well before the load stops.
  let at = 8_000;
  const last = durationMs - 6_000;
  // Spread the first round over the run (a one-minute run still meets every kind once), at most 10 s apart.
  const slot = Math.min(10_000, Math.max(2_000, (last - at) / kinds.length));
  const pick = () => FAULT_KINDS[Math.floor(random() * FAULT_KINDS.length)]!;
  for (let n = 0; at < last; n++) {
    const first = n < kinds.length;
    const kind = first ? kinds[n]! : pick();
    const holdMs = 1_000 + Math.floor(random() * 3_000);
    const other = !first && random() < 0.4 ? pick() : undefined;
    schedule.push({
      kind,
      atMs: Math.round(at),
      holdMs,
      ...(other && other !== kind ? { with: other } : {}),
    });
    at += first ? slot : slot + Math.floor(random() * 4_000);
  }
  return schedule;
}

export function describeSchedule(schedule: PlannedFault[]): string {
  return schedule
    .map(
      (f) =>
        `  +${(f.atMs / 1000).toFixed(1).padStart(6)} s  ${f.kind.padEnd(26)} hold ${f.holdMs} ms` +
        (f.with ? `  with ${f.with}` : ""),
    )
    .join("\n");
}

/** What a fault did: from the moment it was injected until what it broke answered again. */
export interface FaultWindow {
  kind: FaultKind;
  startedAt: number;
  healedAt: number;
  /** Anything worth knowing: the pid killed, the instance lost, or why nothing was done. */
  note: string;
  skipped?: boolean;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`soak: ${what} did not happen within ${timeoutMs / 1000} s`);
    await sleep(200);
  }
}

/** Every process answers again: a fault has healed only when the platform as a whole is back. */
async function allReady(soak: SoakPlatform): Promise<boolean> {
  const states = await Promise.all(
    (["sessions", "billing", "accounts", "auth-proxy", "gateway"] as const).map((s) => soak.ready(s)),
  );
  return states.every(Boolean);
}

/**
 * SIGKILL, then the launcher starts it again on its port. The cloud simulator lives in the sessions process, so
 * killing sessions also loses every simulated instance and volume (harsher than EC2, where they outlive it): its
 * running sessions fail as lost and each account's next start meets a volume that no longer exists.
 */
async function killService(soak: SoakPlatform, service: ServiceName): Promise<string> {
  const pid = soak.platform.pidOf(service);
  if (!pid) throw new Error(`soak: no pid printed for ${service}`);
  // A paired PostgreSQL fault may have the database down: then nothing is known lost, nothing awaited.
  const lost = service === "sessions" ? await activeSessions(soak).catch(() => []) : [];
  process.kill(pid, "SIGKILL");
  await until(`${service} restarted`, async () => {
    const now = soak.platform.pidOf(service);
    return now !== undefined && now !== pid && (await soak.ready(service));
  });
  // As for one lost instance: healed when sessions has ended every session whose instance went with the process.
  if (lost.length > 0)
    await until("sessions ended the sessions of the simulator's lost instances", async () => {
      const still = await activeSessions(soak).catch(() => undefined);
      return still !== undefined && lost.every((id) => !still.includes(id));
    });
  return `pid ${pid} -> ${soak.platform.pidOf(service)}${lost.length ? `, ${lost.length} sessions' instances lost` : ""}`;
}

/** Sessions starting or running on an instance. */
async function activeSessions(soak: SoakPlatform): Promise<string[]> {
  const db = await soak.database("sessions");
  try {
    const { rows } = await db.query<{ id: string }>(
      "select id from sessions where state in ('starting', 'running') and instance_id is not null",
    );
    return rows.map((r) => r.id);
  } finally {
    await db.end();
  }
}

/**
 * A running session's instance, chosen by the seed among those running now (none: the fault is skipped). It heals
 * when sessions has noticed: the session is no longer running.
 */
async function loseInstance(soak: SoakPlatform, random: () => number): Promise<string | undefined> {
  const db = await soak.database("sessions");
  try {
    const { rows } = await db.query<{ id: string; instance_id: string }>(
      "select id, instance_id from sessions where state = 'running' and instance_id is not null order by id",
    );
    if (rows.length === 0) return undefined;
    const { id, instance_id: instanceId } = rows[Math.floor(random() * rows.length)]!;
    const res = await fetch(
      `http://127.0.0.1:${soak.portOf("sessions")}/internal/v1/simulator/instances/${instanceId}/lose`,
      { method: "POST" },
    );
    await until(`session ${id} ended after its instance was lost`, async () => {
      const now = await db.query<{ state: string }>("select state from sessions where id = $1", [id]);
      return now.rows[0]?.state !== "running";
    });
    const ended = await db.query<{ state: string }>("select state from sessions where id = $1", [id]);
    return `${instanceId} (${res.status}) of session ${id}, now ${ended.rows[0]?.state}`;
  } finally {
    await db.end();
  }
}

async function cutDatabaseConnections(soak: SoakPlatform): Promise<string> {
  const db = await soak.database("sessions");
  try {
    const { rowCount } = await db.query(
      "select pg_terminate_backend(pid) from pg_stat_activity where datname like 'soak_%' and pid <> pg_backend_pid()",
    );
    return `${rowCount ?? 0} connections terminated`;
  } finally {
    await db.end();
  }
}

/** Injects one fault, holds it, heals it, and waits until every process answers again. */
export async function injectFault(
  soak: SoakPlatform,
  fault: PlannedFault,
  random: () => number,
): Promise<FaultWindow> {
  const startedAt = Date.now();
  let note = "";
  switch (fault.kind) {
    case "kill:sessions":
    case "kill:billing":
    case "kill:accounts":
    case "kill:auth-proxy":
    case "kill:gateway":
      note = await killService(soak, fault.kind.slice("kill:".length) as ServiceName);
      break;
    case "postgres:crash":
      await soak.postgres.down();
      await sleep(fault.holdMs);
      await soak.postgres.up();
      note = `down ${fault.holdMs} ms`;
      break;
    case "postgres:cut-connections":
      note = await cutDatabaseConnections(soak);
      break;
    case "redis:kill":
      await soak.redis.kill();
      await sleep(fault.holdMs);
      await soak.redis.restart();
      note = `down ${fault.holdMs} ms (restarted empty)`;
      break;
    case "sqs:outage":
      await soak.sqs.cut();
      await sleep(fault.holdMs);
      await soak.sqs.restore();
      note = `cut ${fault.holdMs} ms`;
      break;
    case "idp:outage":
      await soak.idp.cut();
      await sleep(fault.holdMs);
      await soak.idp.restore();
      note = `cut ${fault.holdMs} ms`;
      break;
    case "instance:lose": {
      const lost = await loseInstance(soak, random);
      if (!lost)
        return {
          kind: fault.kind,
          startedAt,
          healedAt: startedAt,
          note: "no running session",
          skipped: true,
        };
      note = lost;
      break;
    }
  }
  await until(`the platform ready after ${fault.kind}`, () => allReady(soak));
  return { kind: fault.kind, startedAt, healedAt: Date.now(), note };
}
