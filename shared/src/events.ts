import { randomUUID } from "node:crypto";
import { z } from "zod";

const isoDateTime = z.string().datetime({ offset: true });
const minorUnits = z.number().int();
const currency = z
  .string()
  .length(3)
  .regex(/^[A-Z]{3}$/, "ISO 4217 code in upper case");

/** Why billing stops paying for a session: the wallet runs dry, or the player's own spending limit is reached. */
const stopCause = z.enum(["balance", "spend_limit"]);

/** The spending limit a forecast or stop is about: the UTC day's or the UTC calendar month's, in minor units. */
const spendLimit = z.object({
  period: z.enum(["day", "month"]),
  amount: minorUnits.positive(),
});

/** Data schema of every event type exchanged between services (DESIGN §3). */
export const eventDataSchemas = {
  /** The instance reached running: metering begins at `startedAt` (the running time, not the launch). */
  "session.started": z.object({
    sessionId: z.string().min(1),
    instanceId: z.string().min(1),
    ratePerMinute: minorUnits.nonnegative(),
    currency,
    startedAt: isoDateTime,
  }),
  "session.stopped": z.object({
    sessionId: z.string().min(1),
    /** When metering began (running); null when the session was stopped before it ever ran. */
    startedAt: isoDateTime.nullable(),
    stoppedAt: isoDateTime,
    ratePerMinute: minorUnits.nonnegative(),
    currency,
    reason: z.string().min(1),
  }),
  "session.failed": z.object({
    sessionId: z.string().min(1),
    reason: z.string().min(1),
    message: z.string(),
    failedAt: isoDateTime,
    /** When metering began (session.started, the running time); null when the session never ran. */
    startedAt: isoDateTime.nullable().optional(),
    ratePerMinute: minorUnits.nonnegative().optional(),
    currency: currency.optional(),
  }),
  /**
   * A minute of this session started that billing could not pay in full: the wallet ran dry (`reason` balance, the
   * default of events from before it existed) or the player's spending limit was reached (`spend_limit`, naming
   * it). Sessions stops that session only.
   */
  "credits.exhausted": z.object({
    sessionId: z.string().min(1),
    balance: minorUnits,
    currency,
    reason: stopCause.optional(),
    spendLimit: spendLimit.optional(),
  }),
  /**
   * Billing's forecast for a running session: it pays for it only until `runsOutAt` (less than the warning window
   * is left), because the balance runs out or, with `reason` spend_limit, the named spending limit is reached. Null
   * once more is left again (a top-up, a raised limit). Sessions shows it in poll before the stop.
   */
  "credits.low": z.object({
    sessionId: z.string().min(1),
    runsOutAt: isoDateTime.nullable(),
    balance: minorUnits,
    currency,
    reason: stopCause.optional(),
    spendLimit: spendLimit.optional(),
  }),
  /**
   * Billing still meters these sessions of the account: sessions answers with a fresh session.stopped or
   * session.failed for each one that has in truth ended (a lost or DLQ'd end event still ends the charge).
   */
  "metering.audit": z.object({
    sessionIds: z.array(z.string().min(1)).min(1).max(100),
  }),
  "account.purge": z.object({
    identityUserId: z.string().min(1),
    requestedAt: isoDateTime,
  }),
} as const;

export type EventType = keyof typeof eventDataSchemas;
export type StopCause = z.infer<typeof stopCause>;
export type SpendLimitRef = z.infer<typeof spendLimit>;
export type EventData<T extends EventType> = z.infer<(typeof eventDataSchemas)[T]>;

export const eventTypes = Object.keys(eventDataSchemas) as EventType[];

export interface EventEnvelope<T extends EventType = EventType> {
  id: string;
  type: T;
  occurredAt: string;
  accountId: string;
  data: EventData<T>;
}

/** Discriminated union over every registered event type: narrow with `event.type`. */
export type AnyEvent = { [T in EventType]: EventEnvelope<T> }[EventType];

/** The envelope alone; `data` is checked against the type's schema by {@link parseEvent}. */
export const eventEnvelopeSchema = z.object({
  id: z.string().uuid(),
  type: z.string().min(1),
  occurredAt: isoDateTime,
  accountId: z.string().min(1),
  data: z.unknown(),
});

export function isEventType(type: string): type is EventType {
  return Object.prototype.hasOwnProperty.call(eventDataSchemas, type);
}

export interface CreateEventOptions {
  id?: string;
  occurredAt?: Date;
}

/** Builds a validated envelope; throws a ZodError when `data` does not match the type's schema. */
export function createEvent<T extends EventType>(
  type: T,
  accountId: string,
  data: EventData<T>,
  options: CreateEventOptions = {},
): EventEnvelope<T> {
  const schema: z.ZodType<EventData<T>> = eventDataSchemas[type] as unknown as z.ZodType<EventData<T>>;
  const event = {
    id: options.id ?? randomUUID(),
    type,
    occurredAt: (options.occurredAt ?? new Date()).toISOString(),
    accountId,
    data: schema.parse(data),
  };
  eventEnvelopeSchema.parse(event);
  return event;
}

export type ParseEventResult = { success: true; event: AnyEvent } | { success: false; error: string };

/** Validates an unknown value (e.g. a parsed SQS body) as an envelope of a registered event type. */
export function parseEvent(input: unknown): ParseEventResult {
  const envelope = eventEnvelopeSchema.safeParse(input);
  if (!envelope.success) {
    return { success: false, error: formatIssues("envelope", envelope.error) };
  }
  const { type } = envelope.data;
  if (!isEventType(type)) {
    return { success: false, error: `unknown event type "${type}"` };
  }
  const data = eventDataSchemas[type].safeParse(envelope.data.data);
  if (!data.success) {
    return { success: false, error: formatIssues(`${type} data`, data.error) };
  }
  return { success: true, event: { ...envelope.data, type, data: data.data } as AnyEvent };
}

function formatIssues(what: string, error: z.ZodError): string {
  const issues = error.issues.map((issue) => `${issue.path.join(".") || "(root)"}: ${issue.message}`);
  return `invalid ${what}: ${issues.join("; ")}`;
}
