import { ListQueuesCommand, ReceiveMessageCommand, SQSClient } from "@aws-sdk/client-sqs";
import type { FaultWindow } from "./soak-faults";
import type { PaymentRecord, RequestRecord } from "./soak-players";
import { SOAK_MINUTE_MS, type SoakPlatform } from "./soak-platform";

/** After a fault has healed, requests already under way may still meet it: this long counts as inside it. */
export const FAULT_GRACE_MS = 3_000;

export interface Invariant {
  name: string;
  checked: number;
  violations: string[];
}

export interface DeadLetter {
  queue: string;
  eventType: string;
  eventId: string;
  why: string;
}

export interface AuditResult {
  invariants: Invariant[];
  deadLetters: DeadLetter[];
  settledInMs: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export const overlaps = (r: RequestRecord, windows: FaultWindow[], kinds?: (k: string) => boolean) =>
  windows.some(
    (w) =>
      !w.skipped &&
      w.healedAt > w.startedAt &&
      (!kinds || kinds(w.kind)) &&
      r.at <= w.healedAt + FAULT_GRACE_MS &&
      r.at + r.ms >= w.startedAt,
  );

export const isServerError = (r: RequestRecord) => r.status === 0 || r.status >= 500;

async function pendingWork(soak: SoakPlatform): Promise<string[]> {
  const pending: string[] = [];
  for (const service of ["sessions", "billing", "accounts"] as const) {
    const db = await soak.database(service);
    try {
      const outbox = await db.query<{ n: string }>("select count(*) as n from outbox where sent_at is null");
      if (Number(outbox.rows[0]!.n) > 0) pending.push(`${service} outbox ${outbox.rows[0]!.n}`);
      if (service === "sessions") {
        const active = await db.query<{ n: string }>(
          "select count(*) as n from sessions where state in ('starting', 'running', 'stopping')",
        );
        if (Number(active.rows[0]!.n) > 0) pending.push(`${active.rows[0]!.n} sessions active`);
      }
      if (service === "billing") {
        const metered = await db.query<{ n: string }>(
          "select count(*) as n from metered_sessions where status = 'running'",
        );
        if (Number(metered.rows[0]!.n) > 0) pending.push(`${metered.rows[0]!.n} sessions metered`);
      }
    } finally {
      await db.end();
    }
  }
  return pending;
}

/** Waits (bounded) until no session is active, nothing is metered and every outbox is sent. */
export async function settle(
  soak: SoakPlatform,
  timeoutMs: number,
  log: (l: string) => void,
): Promise<number> {
  const began = Date.now();
  let pending: string[] = [];
  while (Date.now() - began < timeoutMs) {
    try {
      pending = await pendingWork(soak);
      if (pending.length === 0) return Date.now() - began;
    } catch (err) {
      pending = [String(err)];
    }
    await sleep(1_000);
  }
  log(`soak: still pending after ${timeoutMs / 1000} s: ${pending.join(", ")}`);
  return Date.now() - began;
}

type Row = Record<string, unknown>;
const num = (v: unknown) => Number(v ?? 0);
const ms = (v: unknown) => (v instanceof Date ? v.getTime() : v ? Date.parse(String(v)) : NaN);

async function chargesMatchMinutes(soak: SoakPlatform): Promise<Invariant> {
  const sessions = await soak.database("sessions");
  const billing = await soak.database("billing");
  const violations: string[] = [];
  try {
    const { rows } = await sessions.query<Row>(
      "select id, state, rate_per_minute, running_at, stopped_at, ended_at, stop_reason from sessions",
    );
    const metered = new Map(
      (await billing.query<Row>("select * from metered_sessions")).rows.map((r) => [String(r.session_id), r]),
    );
    const usage = new Map(
      (
        await billing.query<Row>(
          `select details->>'sessionId' as session_id, sum(amount) as total from ledger_entries
            where kind in ('usage', 'usage_refund') group by 1`,
        )
      ).rows.map((r) => [String(r.session_id), -num(r.total)]),
    );
    for (const s of rows) {
      const id = String(s.id);
      const m = metered.get(id);
      if (!["stopped", "failed"].includes(String(s.state))) continue;
      if (!s.running_at) {
        if (m && num(m.charged_minutes) > 0)
          violations.push(`${id}: never ran, charged ${num(m.charged_minutes)} min`);
        continue;
      }
      const end = s.state === "stopped" ? ms(s.stopped_at ?? s.ended_at) : ms(s.ended_at);
      const elapsed = end - ms(s.running_at);
      const expected = elapsed <= 0 ? 0 : Math.ceil(elapsed / SOAK_MINUTE_MS);
      const rate = num(s.rate_per_minute);
      if (!m) {
        if (expected > 0) violations.push(`${id} (${String(s.state)}): ran ${expected} min, never metered`);
        continue;
      }
      const charged = num(m.charged_minutes);
      const paid = usage.get(id) ?? 0;
      if (m.status !== "stopped") violations.push(`${id}: ended in sessions, still metered in billing`);
      else if (charged !== expected)
        violations.push(
          `${id} (${String(s.state)}, ${String(s.stop_reason ?? "")}): ran ${expected} started min, charged ${charged}`,
        );
      else if (paid + num(m.uncovered) !== expected * rate)
        violations.push(
          `${id}: ${expected} min at ${rate} is ${expected * rate}, paid ${paid} + uncovered ${num(m.uncovered)}`,
        );
    }
    return {
      name: "every session's charge equals its started running minutes",
      checked: rows.length,
      violations,
    };
  } finally {
    await sessions.end();
    await billing.end();
  }
}

async function walletsBalance(soak: SoakPlatform): Promise<Invariant> {
  const billing = await soak.database("billing");
  try {
    // findLedgerMismatches' query (services/billing/src/data/wallet-repository.ts), plus negative amounts.
    const { rows } = await billing.query<Row>(`
      select coalesce(w.account_id, l.account_id) as account_id, coalesce(w.balance, 0) as balance,
             coalesce(w.shortfall, 0) as shortfall, coalesce(w.held, 0) as held, coalesce(l.total, 0) as ledger
        from wallets w
        full outer join (select account_id, sum(amount) as total from ledger_entries group by account_id) l
          on l.account_id = w.account_id`);
    const violations: string[] = [];
    for (const r of rows) {
      const [balance, shortfall, held, ledger] = [
        num(r.balance),
        num(r.shortfall),
        num(r.held),
        num(r.ledger),
      ];
      if (balance - shortfall !== ledger)
        violations.push(
          `${String(r.account_id)}: balance ${balance} - shortfall ${shortfall} != ledger ${ledger}`,
        );
      if (balance < 0 || shortfall < 0 || held < 0)
        violations.push(
          `${String(r.account_id)}: negative (balance ${balance}, shortfall ${shortfall}, held ${held})`,
        );
    }
    return { name: "balance = ledger sum - shortfall, never negative", checked: rows.length, violations };
  } finally {
    await billing.end();
  }
}

async function paymentsOnce(soak: SoakPlatform, payments: PaymentRecord[]): Promise<Invariant[]> {
  const billing = await soak.database("billing");
  try {
    const entries = (
      await billing.query<Row>(
        "select kind, reference, amount, account_id from ledger_entries where kind in ('topup', 'refund', 'dispute_lost')",
      )
    ).rows;
    const topups = new Map(
      (await billing.query<Row>("select checkout_session_id, status from topups")).rows.map((r) => [
        String(r.checkout_session_id),
        String(r.status),
      ]),
    );
    const credited = new Map<string, number>();
    for (const e of entries) if (e.kind === "topup") credited.set(String(e.reference), num(e.amount));
    const once: string[] = [];
    const takeBacks: string[] = [];
    for (const p of payments) {
      const credit = credited.get(`topup:${p.checkoutSessionId}`);
      const status = topups.get(p.checkoutSessionId);
      if (
        p.acked &&
        credit === undefined &&
        status !== "refunded_closed_wallet" &&
        status !== "refund_pending"
      )
        once.push(`${p.checkoutSessionId} (${p.delivery}): acknowledged, never credited (top-up ${status})`);
      if (credit !== undefined && credit !== p.amount)
        once.push(`${p.checkoutSessionId}: paid ${p.amount}, credited ${credit}`);
      const refundTaken = -entries
        .filter((e) => e.kind === "refund" && String(e.reference).startsWith(`refund:${p.paymentIntentId}:`))
        .reduce((sum, e) => sum + num(e.amount), 0);
      const wanted = p.refundsAcked.length ? Math.min(p.amount, Math.max(...p.refundsAcked)) : 0;
      if (refundTaken !== wanted)
        takeBacks.push(
          `${p.paymentIntentId}: refunds acknowledged up to ${wanted}, taken back ${refundTaken}`,
        );
      if (p.dispute) {
        const lost = -entries
          .filter((e) => e.kind === "dispute_lost" && e.reference === `dispute:${p.dispute!.id}`)
          .reduce((sum, e) => sum + num(e.amount), 0);
        const due = p.dispute.closedAcked && p.dispute.outcome === "lost" ? p.amount : 0;
        if (lost !== due)
          takeBacks.push(`${p.dispute.id} (${p.dispute.outcome}): ${due} due, taken back ${lost}`);
      }
    }
    // Every credit in the books is one the soak paid (the unique reference makes a second credit impossible).
    const paid = new Set(payments.map((p) => `topup:${p.checkoutSessionId}`));
    for (const ref of credited.keys()) if (!paid.has(ref)) once.push(`${ref}: credited, never paid`);
    return [
      { name: "no payment credited twice or lost", checked: payments.length, violations: once },
      {
        name: "refunds and lost disputes taken back once",
        checked: payments.filter((p) => p.refundsAcked.length || p.dispute).length,
        violations: takeBacks,
      },
    ];
  } finally {
    await billing.end();
  }
}

async function noStuckSessions(soak: SoakPlatform, boundMs: number): Promise<Invariant> {
  const sessions = await soak.database("sessions");
  try {
    const { rows } = await sessions.query<Row>(
      "select id, state, updated_at from sessions where state in ('starting', 'stopping', 'running')",
    );
    const total = await sessions.query<{ n: string }>("select count(*) as n from sessions");
    const violations = rows
      .filter((r) => r.state !== "running" && Date.now() - ms(r.updated_at) > boundMs)
      .map((r) => `${String(r.id)}: ${String(r.state)} since ${new Date(ms(r.updated_at)).toISOString()}`);
    // The players stopped everything they started: one still running after the settle was never stopped.
    for (const r of rows.filter((r) => r.state === "running"))
      violations.push(`${String(r.id)}: still running after every player stopped`);
    return {
      name: `no session left in starting or stopping (beyond ${boundMs / 1000} s)`,
      checked: Number(total.rows[0]!.n),
      violations,
    };
  } finally {
    await sessions.end();
  }
}

async function noOrphanInstances(soak: SoakPlatform): Promise<Invariant> {
  const res = await fetch(`http://127.0.0.1:${soak.portOf("sessions")}/internal/v1/simulator/instances`);
  const { items } = (await res.json()) as {
    items: { instanceId: string; sessionId: string | null; poolId: string | null; state: string }[];
  };
  const sessions = await soak.database("sessions");
  try {
    const active = new Set(
      (
        await sessions.query<Row>(
          "select instance_id from sessions where state in ('starting', 'running', 'stopping') and instance_id is not null",
        )
      ).rows.map((r) => String(r.instance_id)),
    );
    const pools = new Set(
      (
        await sessions
          .query<Row>("select instance_id from pool_instances where instance_id is not null")
          .catch(() => ({ rows: [] as Row[] }))
      ).rows.map((r) => String(r.instance_id)),
    );
    const violations = items
      .filter((i) => ["pending", "running"].includes(i.state))
      .filter((i) => !active.has(i.instanceId) && !(i.poolId && pools.has(i.instanceId)))
      .map((i) => `${i.instanceId} (${i.state}) of session ${i.sessionId ?? "none"}`);
    return { name: "no instance running without a session", checked: items.length, violations };
  } finally {
    await sessions.end();
  }
}

async function outboxDrained(soak: SoakPlatform): Promise<Invariant> {
  const violations: string[] = [];
  let checked = 0;
  for (const service of ["sessions", "billing", "accounts"] as const) {
    const db = await soak.database(service);
    try {
      const { rows } = await db.query<Row>(
        "select event_type, destination, attempts, last_error, sent_at from outbox",
      );
      checked += rows.length;
      for (const r of rows.filter((r) => !r.sent_at))
        violations.push(
          `${service}: ${String(r.event_type)} to ${String(r.destination)} unsent after ${num(r.attempts)} attempts (${String(r.last_error ?? "")})`,
        );
    } finally {
      await db.end();
    }
  }
  return { name: "the outbox drained", checked, violations };
}

/** The dead-letter queues of the soak's own queues (on the shared moto), each message with the reason logged. */
async function deadLetters(soak: SoakPlatform, output: string): Promise<DeadLetter[]> {
  const sqs = new SQSClient({ endpoint: process.env.AWS_ENDPOINT_URL ?? "http://127.0.0.1:5000" });
  const listed: DeadLetter[] = [];
  try {
    const queues = await sqs.send(new ListQueuesCommand({ QueueNamePrefix: soak.queuePrefix }));
    for (const url of (queues.QueueUrls ?? []).filter((u) => u.endsWith("-dlq"))) {
      const seen = new Set<string>();
      for (;;) {
        const got = await sqs.send(
          new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, VisibilityTimeout: 60 }),
        );
        const messages = (got.Messages ?? []).filter((m) => !seen.has(m.MessageId!));
        if (messages.length === 0) break;
        for (const m of messages) {
          seen.add(m.MessageId!);
          let event: { id?: string; type?: string } = {};
          try {
            event = JSON.parse(m.Body ?? "{}") as typeof event;
          } catch {
            // listed as it is
          }
          const line = output
            .split("\n")
            .find((l) => event.id && l.includes(event.id) && /error|fail/i.test(l));
          listed.push({
            queue: url.split("/").pop()!,
            eventType: event.type ?? "(not an event)",
            eventId: event.id ?? m.MessageId!,
            why: line ? line.slice(0, 300) : "no reason in the services' logs",
          });
        }
      }
    }
  } finally {
    sqs.destroy();
  }
  return listed;
}

function requestInvariants(requests: RequestRecord[], windows: FaultWindow[]): Invariant[] {
  const outside = requests.filter((r) => !overlaps(r, windows));
  const serverErrors = outside
    .filter(isServerError)
    .map(
      (r) =>
        `${new Date(r.at).toISOString()} ${r.method} ${r.route}: ${r.status || "no answer"}${r.error ? ` (${r.error})` : ""}`,
    );
  const duringIdp = requests.filter((r) => overlaps(r, windows, (k) => k === "idp:outage"));
  const unauthorized = duringIdp
    .filter((r) => r.status === 401)
    .map((r) => `${new Date(r.at).toISOString()} ${r.method} ${r.route}: 401`);
  const anyUnauthorized = requests
    .filter((r) => r.status === 401)
    .map((r) => `${new Date(r.at).toISOString()} ${r.method} ${r.route}: 401`);
  return [
    {
      name: "no 5xx (or no answer) outside fault windows",
      checked: outside.length,
      violations: serverErrors,
    },
    {
      name: "no 401 during an identity-provider outage (503 instead)",
      checked: duringIdp.length,
      violations: unauthorized,
    },
    { name: "no 401 for a valid token at any time", checked: requests.length, violations: anyUnauthorized },
  ];
}

export async function audit(options: {
  soak: SoakPlatform;
  requests: RequestRecord[];
  payments: PaymentRecord[];
  windows: FaultWindow[];
  settleTimeoutMs: number;
  log(line: string): void;
}): Promise<AuditResult> {
  const { soak } = options;
  const settledInMs = await settle(soak, options.settleTimeoutMs, options.log);
  const invariants = [
    await chargesMatchMinutes(soak),
    await walletsBalance(soak),
    ...(await paymentsOnce(soak, options.payments)),
    await noStuckSessions(soak, 60_000),
    await noOrphanInstances(soak),
    await outboxDrained(soak),
    ...requestInvariants(options.requests, options.windows),
  ];
  const letters = await deadLetters(soak, soak.platform.output());
  invariants.push({
    name: "every dead-lettered message listed with why",
    checked: letters.length,
    violations: letters
      .filter((l) => l.why.startsWith("no reason"))
      .map((l) => `${l.queue}: ${l.eventType} ${l.eventId}`),
  });
  return { invariants, deadLetters: letters, settledInMs };
}
