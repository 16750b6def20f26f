import {
  DeleteQueueCommand,
  GetQueueUrlCommand,
  ListQueuesCommand,
  SendMessageCommand,
} from "@aws-sdk/client-sqs";
import { createTestSqsClient, waitUntil } from "@cgs/shared/testing/queue";
import {
  callApi,
  fastJourneyEnv,
  launchPlatform,
  localToken,
  type LaunchedPlatform,
} from "./launch-platform";

// What an SRE sees after a player's journey over `npm start`: the journey's trace in Zipkin, every process
// scraped by Prometheus with the journey counted, and a message forced into a DLQ raising the metric and the
// alert. Ports of its own (gateway 18380, services 18401-18404, metrics +1000, Prometheus 19390, Zipkin 19412).
const PROMETHEUS = "http://127.0.0.1:19390";
const ZIPKIN = "http://127.0.0.1:19412";
const prefix = `sre-${Date.now()}-`;
const sqs = createTestSqsClient();
let platform: LaunchedPlatform;
let token: string;

beforeAll(async () => {
  platform = await launchPlatform({
    gatewayPort: 18380,
    servicePortBase: 18401,
    observability: { prometheusPort: 19390, zipkinPort: 19412 },
    env: fastJourneyEnv(prefix),
  });
  token = localToken(`sre-${Date.now()}@example.com`);
}, 240_000);

afterAll(async () => {
  await platform?.cleanup();
  const { QueueUrls = [] } = await sqs.send(new ListQueuesCommand({ QueueNamePrefix: prefix }));
  await Promise.all(QueueUrls.map((QueueUrl) => sqs.send(new DeleteQueueCommand({ QueueUrl }))));
  sqs.destroy();
}, 60_000);

const api = <T = Record<string, unknown>>(method: string, path: string, body?: unknown) =>
  callApi<T>(platform.base, token, method, path, body);

/** One instant query; the value of each non-zero series keyed by the given label. */
async function promQuery(query: string, by = "service"): Promise<Record<string, number>> {
  const res = await fetch(`${PROMETHEUS}/api/v1/query?query=${encodeURIComponent(query)}`);
  const json = (await res.json()) as {
    data: { result: { metric: Record<string, string>; value: [number, string] }[] };
  };
  // Every process exports every metric, so series that are still 0 are left out.
  return Object.fromEntries(
    json.data.result
      .filter((r) => Number(r.value[1]) !== 0)
      .map((r) => [r.metric[by] ?? "", Number(r.value[1])]),
  );
}

interface ZipkinSpan {
  traceId: string;
  kind?: string;
  name?: string;
  localEndpoint?: { serviceName?: string };
}

describe("what an SRE sees after a player's journey", () => {
  test("when a player tops up, plays and stops, then the journey succeeds", async () => {
    const topup = await api<{ checkoutUrl: string }>("POST", "/credits/topup", { amount: 2000 });
    expect(topup.status).toBe(200);
    const paid = await fetch(`${topup.body.checkoutUrl}/pay`, { method: "POST", redirect: "manual" });
    expect(paid.status).toBe(303);
    await waitUntil(
      async () =>
        (await api<{ balance: number }>("GET", "/credits/me")).body.balance > 0 ? true : undefined,
      { timeoutMs: 15_000, description: "the top-up credited" },
    );
    expect((await api("POST", "/sessions/start")).status).toBe(200);
    await waitUntil(
      async () => {
        const poll = await api<{ state: string; ready: boolean }>("GET", "/sessions/poll");
        return poll.body.state === "running" && poll.body.ready ? true : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 250, description: "the session ready" },
    );
    expect((await api("POST", "/sessions/pair")).status).toBe(200);
    expect((await api("POST", "/sessions/stop")).status).toBe(200);
  }, 60_000);

  test("when the SRE opens Zipkin, then one trace spans gateway, sessions, its SQS publish and billing's consumer", async () => {
    const found = await waitUntil(
      async () => {
        const res = await fetch(
          `${ZIPKIN}/api/v2/traces?serviceName=billing&spanName=all&limit=100&lookback=600000`,
        );
        const traces = (await res.json()) as ZipkinSpan[][];
        return traces.find((spans) => {
          const has = (service: string, kind?: string) =>
            spans.some((s) => s.localEndpoint?.serviceName === service && (!kind || s.kind === kind));
          return (
            has("gateway", "SERVER") &&
            has("sessions", "SERVER") &&
            has("sessions", "PRODUCER") &&
            has("billing", "CONSUMER")
          );
        });
      },
      {
        timeoutMs: 20_000,
        intervalMs: 500,
        description: "a Zipkin trace from the gateway into billing's consumer",
      },
    );
    expect(new Set(found.map((s) => s.traceId)).size).toBe(1);
    const services = (await (await fetch(`${ZIPKIN}/api/v2/services`)).json()) as string[];
    expect(services).toEqual(expect.arrayContaining(["gateway", "sessions", "billing", "accounts"]));
  }, 30_000);

  test("when the SRE opens Prometheus, then every process is up and the journey's requests and session are counted", async () => {
    const up = await waitUntil(
      async () => {
        const byProcess = await promQuery("up", "process");
        return Object.values(byProcess).filter((v) => v === 1).length === 5 ? byProcess : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 500, description: "all five processes scraped and up" },
    );
    expect(up).toEqual({ gateway: 1, sessions: 1, billing: 1, accounts: 1, "auth-proxy": 1 });

    const counted = await waitUntil(
      async () => {
        const [starts, ready, credited] = await Promise.all([
          promQuery('sum by (service) (http_requests_total{route="/api/v1/sessions/start",status="200"})'),
          promQuery("sum by (service) (cgs_session_start_to_ready_seconds_count)"),
          promQuery('sum by (service) (cgs_credits_minor_units_total{direction="in"})'),
        ]);
        return starts.gateway && starts.sessions && ready.sessions && credited.billing
          ? { starts, ready, credited }
          : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 500, description: "the journey counted in Prometheus" },
    );
    expect(counted.starts).toEqual({ gateway: 1, sessions: 1 });
    expect(counted.ready).toEqual({ sessions: 1 });
    expect(counted.credited.billing).toBe(2000);
    // Route templates only: no series carries an id from a path (checkout sessions, accounts).
    const routes = Object.keys(await promQuery("count by (route) (http_requests_total)", "route"));
    expect(routes).toContain("/api/v1/sessions/poll");
    expect(routes.filter((r) => /[0-9a-f]{8}-[0-9a-f]{4}|cs_[A-Za-z0-9]/.test(r))).toEqual([]);
  }, 60_000);

  test("when a message is forced into billing's DLQ, then the DLQ metric rises and the DLQ alert is raised", async () => {
    const { QueueUrl } = await sqs.send(new GetQueueUrlCommand({ QueueName: `${prefix}cgs-billing` }));
    // Not JSON: the consumer can never handle it and moves it to the DLQ at once.
    await sqs.send(new SendMessageCommand({ QueueUrl, MessageBody: "not an event" }));
    const raised = await waitUntil(
      async () => {
        const [depth, sent] = await Promise.all([
          promQuery("cgs_dlq_depth"),
          promQuery("cgs_dlq_messages_total"),
        ]);
        return depth.billing && sent.billing ? { depth, sent } : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 500, description: "billing's DLQ metrics raised" },
    );
    expect(raised.depth.billing).toBe(1);
    expect(raised.sent.billing).toBe(1);
    expect(raised.depth.sessions ?? 0).toBe(0);
    const alerts = await waitUntil(
      async () => {
        const firingOrPending = await promQuery('ALERTS{alertname="CgsDeadLetterQueueNotEmpty"}');
        return firingOrPending.billing ? firingOrPending : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 500, description: "the DLQ alert raised in Prometheus" },
    );
    expect(alerts).toEqual({ billing: 1 });
  }, 60_000);

  test("when the SRE reads the log line about the dead-lettered message, then its trace id opens that message's trace in Zipkin", async () => {
    const line = platform
      .output()
      .split("\n")
      .filter((l) => l.startsWith("billing") && l.includes('"unprocessable message"'))
      .map((l) => JSON.parse(l.slice(l.indexOf("{"))) as { trace_id?: string })
      .at(-1);
    expect(line?.trace_id).toMatch(/^[0-9a-f]{32}$/);
    const spans = await waitUntil(
      async () => {
        const res = await fetch(`${ZIPKIN}/api/v2/trace/${line?.trace_id}`);
        return res.ok ? ((await res.json()) as ZipkinSpan[]) : undefined;
      },
      { timeoutMs: 10_000, intervalMs: 500, description: "the log line's trace in Zipkin" },
    );
    expect(spans).toContainEqual(
      expect.objectContaining({
        kind: "CONSUMER",
        localEndpoint: expect.objectContaining({ serviceName: "billing" }),
      }),
    );
  }, 30_000);
});
