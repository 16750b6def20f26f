import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

/**
 * Every metric the platform exports, defined once so names and labels match the alert rules
 * (charts/cgs-platform/files/alerts.yaml). Labels are bounded: route templates, states, buckets,
 * reasons; never account ids or raw paths. Kept on globalThis so every copy of this module in a
 * process records into the one registry the metrics port serves.
 */
function createPlatformMetrics() {
  const registry = new Registry();
  const r = [registry];
  return {
    registry,
    httpRequests: new Counter({
      name: "http_requests_total",
      help: "HTTP requests answered, by method, route template and status code",
      labelNames: ["method", "route", "status"] as const,
      registers: r,
    }),
    httpDuration: new Histogram({
      name: "http_request_duration_seconds",
      help: "Time to answer an HTTP request, by method and route template",
      labelNames: ["method", "route"] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: r,
    }),
    sessionsByState: new Gauge({
      name: "cgs_sessions",
      help: "Sessions currently in each state",
      labelNames: ["state"] as const,
      registers: r,
    }),
    startToReady: new Histogram({
      name: "cgs_session_start_to_ready_seconds",
      help: "Time from a session's start request until its instance is ready for pairing, by capacity (hot, warm, cold)",
      labelNames: ["capacity"] as const,
      buckets: [2.5, 5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600],
      registers: r,
    }),
    sessionStarts: new Counter({
      name: "cgs_session_starts_total",
      help: "Session starts that got an instance, by where it came from: a hot or warm pool instance, or a cold launch",
      labelNames: ["capacity"] as const,
      registers: r,
    }),
    poolClaimMisses: new Counter({
      name: "cgs_pool_claim_misses_total",
      help: "Starts that found no hot or warm pool instance while the pools are on, and launched cold",
      registers: r,
    }),
    poolInstances: new Gauge({
      name: "cgs_pool_instances",
      help: "Capacity pool instances by region and state (launching, hot, parking, warm)",
      labelNames: ["region", "state"] as const,
      registers: r,
    }),
    poolTarget: new Gauge({
      name: "cgs_pool_target",
      help: "Each region's capacity pool targets (hot, warm), sized from its recent starts within the configured floor and ceiling",
      labelNames: ["region", "kind"] as const,
      registers: r,
    }),
    poolIdleCost: new Gauge({
      name: "cgs_pool_idle_cost_per_hour",
      help: "What each region's idle pool instances cost per hour right now, minor units of the session currency",
      labelNames: ["region"] as const,
      registers: r,
    }),
    poolChanges: new Counter({
      name: "cgs_pool_changes_total",
      help: "Cloud calls the pool keeper made, by action (launch, wake, park, terminate, orphan)",
      labelNames: ["action"] as const,
      registers: r,
    }),
    capacityFailures: new Counter({
      name: "cgs_session_capacity_failures_total",
      help: "Launches that found a cloud region without capacity (a start then tries its next region, or the line)",
      registers: r,
    }),
    queueJoins: new Counter({
      name: "cgs_queue_joins_total",
      help: "Starts that found every allowed region full and waited in line",
      registers: r,
    }),
    queueAdmissions: new Counter({
      name: "cgs_queue_admissions_total",
      help: "Queued sessions that left the line for a freed machine",
      registers: r,
    }),
    queueWait: new Histogram({
      name: "cgs_queue_wait_seconds",
      help: "Time a queued session waited in line before a machine freed for it",
      buckets: [5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600],
      registers: r,
    }),
    queueLength: new Gauge({
      name: "cgs_queue_length",
      help: "Sessions waiting in line, by region they wait for (a session waiting for two regions counts in both)",
      labelNames: ["region"] as const,
      registers: r,
    }),
    sessionWarnings: new Counter({
      name: "cgs_session_warnings_total",
      help: "Automatic stops announced in poll before they happen, by kind (idle, max_length, credits, host_unhealthy)",
      labelNames: ["kind"] as const,
      registers: r,
    }),
    automaticStops: new Counter({
      name: "cgs_session_automatic_stops_total",
      help: "Sessions the platform stopped or ended by itself, by reason (idle, max_length, credits_exhausted, account_deletion, instance_lost)",
      labelNames: ["reason"] as const,
      registers: r,
    }),
    sessionKeepalives: new Counter({
      name: "cgs_session_keepalives_total",
      help: "Keep playing requests, by the warning they answered (none when no warning was showing)",
      labelNames: ["warning"] as const,
      registers: r,
    }),
    hostReports: new Counter({
      name: "cgs_host_reports_total",
      help: "Host agent reports received, by outcome (applied, stale, not_active, refused_signature, refused_instance, refused_schema, refused_certificate)",
      labelNames: ["outcome"] as const,
      registers: r,
    }),
    hostReportAge: new Gauge({
      name: "cgs_host_report_age_seconds",
      help: "Running sessions' newest host report age: the oldest (max) and the median (p50) across sessions",
      labelNames: ["stat"] as const,
      registers: r,
    }),
    sessionsWithoutReports: new Gauge({
      name: "cgs_sessions_host_silent",
      help: "Ready sessions whose host agent has not reported within HOST_REPORT_STALE_MS",
      registers: r,
    }),
    pairingFailures: new Counter({
      name: "cgs_session_pairing_failures_total",
      help: "Pairing attempts refused, by reason",
      labelNames: ["reason"] as const,
      registers: r,
    }),
    credits: new Counter({
      name: "cgs_credits_minor_units_total",
      help: "Credits moved, in minor units: direction in (top-ups) or out (charges), by currency",
      labelNames: ["direction", "currency"] as const,
      registers: r,
    }),
    webhookDuration: new Histogram({
      name: "cgs_webhook_duration_seconds",
      help: "Time to process an inbound payment-provider webhook, by outcome",
      labelNames: ["outcome"] as const,
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers: r,
    }),
    webhookFailures: new Counter({
      name: "cgs_webhook_failures_total",
      help: "Inbound webhooks refused or failed, by reason (signature, processing)",
      labelNames: ["reason"] as const,
      registers: r,
    }),
    outboxBacklog: new Gauge({
      name: "cgs_outbox_backlog",
      help: "Outbox rows committed but not yet relayed to SQS",
      registers: r,
    }),
    outboxOldestAge: new Gauge({
      name: "cgs_outbox_oldest_age_seconds",
      help: "Age of the oldest outbox row not yet relayed (0 when the outbox is drained)",
      registers: r,
    }),
    consumerLag: new Histogram({
      name: "cgs_event_consumer_lag_seconds",
      help: "Time from an event's occurrence until this service's consumer handled it, by event type",
      labelNames: ["event_type"] as const,
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
      registers: r,
    }),
    deadLettered: new Counter({
      name: "cgs_dlq_messages_total",
      help: "Messages this consumer sent to its DLQ or left to SQS redrive on their last allowed receive",
      registers: r,
    }),
    dlqDepth: new Gauge({
      name: "cgs_dlq_depth",
      help: "Messages waiting in this service's dead-letter queue (SQS ApproximateNumberOfMessages)",
      registers: r,
    }),
    meteringLag: new Gauge({
      name: "cgs_metering_lag_seconds",
      help: "Age of the oldest running minute of play not yet charged (0 when metering is current)",
      registers: r,
    }),
    rateLimitRejections: new Counter({
      name: "cgs_rate_limit_rejections_total",
      help: "Requests refused with 429, by rate-limit bucket",
      labelNames: ["bucket"] as const,
      registers: r,
    }),
    /** Run before each scrape: gauges read from the database or SQS (backlog, lag, states). */
    scrapeHooks: [] as (() => Promise<void>)[],
  };
}

export type PlatformMetrics = ReturnType<typeof createPlatformMetrics>;

const METRICS_KEY = Symbol.for("cgs.shared.metrics");
const holder = globalThis as typeof globalThis & { [METRICS_KEY]?: PlatformMetrics };

/** The process's metrics; created on first use. */
export function platformMetrics(): PlatformMetrics {
  return (holder[METRICS_KEY] ??= createPlatformMetrics());
}

/** Shorthand used at the recording sites: `metrics.capacityFailures.inc()`. */
export const metrics: PlatformMetrics = platformMetrics();

/** Registers a gauge refresh that runs before each scrape; returns a function that removes it (for shutdown). */
export function onScrape(hook: () => Promise<void>): () => void {
  const hooks = platformMetrics().scrapeHooks;
  hooks.push(hook);
  return () => {
    const i = hooks.indexOf(hook);
    if (i !== -1) hooks.splice(i, 1);
  };
}

let defaultsCollected = false;

/** Process metrics (CPU, memory, event-loop lag, GC) plus a `service` label on every series. */
export function labelProcessMetrics(service: string): void {
  const { registry } = platformMetrics();
  registry.setDefaultLabels({ service });
  if (!defaultsCollected) {
    defaultsCollected = true;
    collectDefaultMetrics({ register: registry });
  }
}
