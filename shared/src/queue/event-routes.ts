import { GetQueueUrlCommand, type SQSClient } from "@aws-sdk/client-sqs";
import type { EventType } from "../events";

/** Fan-out table: each event type goes to every listed destination (queue name or queue URL). */
export type EventRoutes = Partial<Record<EventType, readonly string[]>>;

export function destinationsFor(routes: EventRoutes, type: EventType): readonly string[] {
  return routes[type] ?? [];
}

export type QueueUrlResolver = (destination: string) => Promise<string>;

/**
 * Turns a destination into a queue URL: URLs pass through, names found in `knownUrls` map directly,
 * other names are looked up once with GetQueueUrl and cached.
 */
export function createQueueUrlResolver(
  sqs: SQSClient,
  knownUrls: Record<string, string> = {},
): QueueUrlResolver {
  const cache = new Map<string, Promise<string>>(
    Object.entries(knownUrls).map(([k, v]) => [k, Promise.resolve(v)]),
  );
  return (destination) => {
    if (/^https?:\/\//.test(destination)) return Promise.resolve(destination);
    let url = cache.get(destination);
    if (!url) {
      url = sqs.send(new GetQueueUrlCommand({ QueueName: destination })).then((out) => {
        if (!out.QueueUrl) throw new Error(`no URL for queue ${destination}`);
        return out.QueueUrl;
      });
      // A failed lookup must not be cached forever.
      url.catch(() => cache.delete(destination));
      cache.set(destination, url);
    }
    return url;
  };
}

/** Inbound queue of each consuming service; infra creates one (plus a DLQ) per service. */
export const serviceQueueNames = {
  sessions: "cgs-sessions",
  billing: "cgs-billing",
  accounts: "cgs-accounts",
} as const;

export type QueueOwner = keyof typeof serviceQueueNames;

/** The queue streaming hosts' agents send their reports to; sessions drains it (infra adds the prefix). */
export const hostReportQueueName = "cgs-host-reports";

/** Which service publishes each event type (from its outbox). */
export const eventPublishers: Record<EventType, QueueOwner> = {
  "session.started": "sessions",
  "session.stopped": "sessions",
  "session.failed": "sessions",
  "credits.exhausted": "billing",
  "credits.low": "billing",
  "metering.audit": "billing",
  "account.purge": "accounts",
};

/** Which service hears which event: the one fan-out table every publisher uses. */
export const platformEventRoutes: EventRoutes = {
  "session.started": [serviceQueueNames.billing],
  "session.stopped": [serviceQueueNames.billing],
  "session.failed": [serviceQueueNames.billing],
  "credits.exhausted": [serviceQueueNames.sessions],
  "credits.low": [serviceQueueNames.sessions],
  "metering.audit": [serviceQueueNames.sessions],
  "account.purge": [serviceQueueNames.sessions, serviceQueueNames.billing],
};

/**
 * The services whose inbound queues `publisher` sends to, read off the two tables above: infra grants
 * sqs:SendMessage and hands out queue URLs from this, so a new route is one edit here.
 */
export function queuesPublishedToBy(
  publisher: string,
  routes: EventRoutes = platformEventRoutes,
): QueueOwner[] {
  const owners = Object.entries(serviceQueueNames) as Array<[QueueOwner, string]>;
  const targets = new Set<QueueOwner>();
  for (const [type, from] of Object.entries(eventPublishers) as Array<[EventType, QueueOwner]>) {
    if (from !== publisher) continue;
    for (const destination of destinationsFor(routes, type)) {
      const owner = owners.find(([, queue]) => queue === destination)?.[0];
      if (owner) targets.add(owner);
    }
  }
  return owners.map(([owner]) => owner).filter((owner) => targets.has(owner));
}

/** Whether `service` owns an inbound queue (infra creates it with a DLQ). */
export function consumesQueue(service: string): boolean {
  return Object.hasOwn(serviceQueueNames, service);
}
