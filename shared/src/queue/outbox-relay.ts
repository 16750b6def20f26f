import type { SQSClient } from "@aws-sdk/client-sqs";
import { SpanKind } from "@opentelemetry/api";
import { and, asc, eq, inArray, isNull, lte, sql } from "drizzle-orm";
import { silentLogger, type ComponentLogger } from "../db/component-logger";
import type { SqlExecutor } from "../db/database-types";
import { outboxTable, type OutboxRow } from "../db/shared-tables";
import { withSpan } from "../tracing/span-helpers";
import { extractTraceContext } from "../tracing/trace-carrier";
import { sendEventMessage } from "./event-publisher";

export interface OutboxRelayOptions {
  db: SqlExecutor;
  sqs: SQSClient;
  /** Destination (as given to enqueueEvent) to queue URL; see createQueueUrlResolver. */
  resolveQueueUrl: (destination: string) => string | Promise<string>;
  /** Pause between polls when the outbox is drained. */
  intervalMs?: number;
  batchSize?: number;
  /** How long a claimed row stays invisible to other relays; a crashed relay's rows come back after it. */
  claimTimeoutMs?: number;
  retryBaseMs?: number;
  retryMaxMs?: number;
  logger?: ComponentLogger;
}

export interface OutboxRelay {
  /** One claim-send-mark pass; resolves to the number of rows claimed. */
  runOnce(): Promise<number>;
  /** Stops polling and waits for the pass in flight. */
  stop(): Promise<void>;
}

type ResolvedOptions = Required<Omit<OutboxRelayOptions, "logger">> & { logger: ComponentLogger };

/**
 * Relays committed outbox rows to SQS. Rows are claimed with FOR UPDATE SKIP LOCKED plus a lease, so
 * replicas never claim the same row at once; a row is marked sent only after SQS accepted it, so a
 * crash in between re-sends it once the lease expires (at-least-once; consumers dedupe by event id).
 */
export function startOutboxRelay(options: OutboxRelayOptions): OutboxRelay {
  const relay = createOutboxRelay(options);
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let inFlight: Promise<void> = Promise.resolve();

  const loop = async (): Promise<void> => {
    timer = undefined;
    let claimed = 0;
    try {
      claimed = await relay.runOnce();
    } catch (err) {
      relay.logger.error({ err }, "outbox relay pass failed");
    }
    if (stopped) return;
    // A full batch means more rows are likely waiting: go again at once.
    timer = setTimeout(schedule, claimed >= relay.options.batchSize ? 0 : relay.options.intervalMs);
  };
  const schedule = () => {
    inFlight = loop();
  };
  schedule();

  return {
    runOnce: relay.runOnce,
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await inFlight;
    },
  };
}

function createOutboxRelay(input: OutboxRelayOptions) {
  const options: ResolvedOptions = {
    intervalMs: 1_000,
    batchSize: 20,
    claimTimeoutMs: 30_000,
    retryBaseMs: 1_000,
    retryMaxMs: 300_000,
    ...input,
    logger: input.logger ?? silentLogger,
  };
  const { db, logger } = options;

  const claim = async (): Promise<OutboxRow[]> => {
    const due = db
      .select({ id: outboxTable.id })
      .from(outboxTable)
      .where(and(isNull(outboxTable.sentAt), lte(outboxTable.availableAt, sql`now()`)))
      .orderBy(asc(outboxTable.id))
      .limit(options.batchSize)
      .for("update", { skipLocked: true });
    const rows: OutboxRow[] = await db
      .update(outboxTable)
      .set({
        availableAt: sql`now() + make_interval(secs => ${options.claimTimeoutMs / 1000})`,
        attempts: sql`${outboxTable.attempts} + 1`,
      })
      .where(inArray(outboxTable.id, due))
      .returning();
    return rows.sort((a, b) => a.id - b.id);
  };

  const relayRow = async (row: OutboxRow): Promise<void> => {
    try {
      await withSpan(
        `${row.destination} publish`,
        {
          kind: SpanKind.PRODUCER,
          parent: extractTraceContext(row.traceContext),
          attributes: {
            "messaging.system": "aws_sqs",
            "messaging.operation.type": "send",
            "messaging.destination.name": row.destination,
            "cgs.event.type": row.eventType,
            "cgs.event.id": row.eventId,
            "cgs.outbox.attempt": row.attempts,
          },
        },
        async () => {
          // Carrier from the active (publish) span, so the consumer becomes its child.
          await sendEventMessage(options.sqs, await options.resolveQueueUrl(row.destination), row.payload);
        },
      );
    } catch (err) {
      const delayMs = retryDelayMs(row.attempts, options.retryBaseMs, options.retryMaxMs);
      logger.warn(
        {
          err,
          outboxId: row.id,
          eventId: row.eventId,
          destination: row.destination,
          attempts: row.attempts,
          delayMs,
        },
        "outbox send failed; will retry",
      );
      await db
        .update(outboxTable)
        .set({
          availableAt: sql`now() + make_interval(secs => ${delayMs / 1000})`,
          lastError: err instanceof Error ? err.message : String(err),
        })
        .where(and(eq(outboxTable.id, row.id), isNull(outboxTable.sentAt)));
      return;
    }
    await db
      .update(outboxTable)
      .set({ sentAt: sql`now()`, lastError: null })
      .where(and(eq(outboxTable.id, row.id), isNull(outboxTable.sentAt)));
    logger.debug({ outboxId: row.id, eventId: row.eventId, destination: row.destination }, "outbox row sent");
  };

  const runOnce = async (): Promise<number> => {
    const rows = await claim();
    const results = await Promise.allSettled(rows.map(relayRow));
    for (const result of results) {
      // The row stays claimed and comes back when its lease ends.
      if (result.status === "rejected") logger.error({ err: result.reason }, "outbox row bookkeeping failed");
    }
    return rows.length;
  };

  return { runOnce, options, logger };
}

/** Exponential backoff with jitter: base·2^(attempt-1), capped, scaled by 0.5–1. */
export function retryDelayMs(attempt: number, baseMs: number, maxMs: number): number {
  const exponential = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(exponential * (0.5 + Math.random() / 2));
}

/** Rows not yet relayed and the age of the oldest, for the backlog gauges. */
export async function outboxBacklog(db: SqlExecutor): Promise<{ rows: number; oldestAgeSeconds: number }> {
  const [row] = await db
    .select({
      rows: sql<number>`count(*)::int`,
      oldestAgeSeconds: sql<number>`coalesce(extract(epoch from now() - min(${outboxTable.createdAt})), 0)::float8`,
    })
    .from(outboxTable)
    .where(isNull(outboxTable.sentAt));
  return { rows: Number(row?.rows ?? 0), oldestAgeSeconds: Number(row?.oldestAgeSeconds ?? 0) };
}
