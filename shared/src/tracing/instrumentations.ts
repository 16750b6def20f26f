import type { IncomingMessage } from "node:http";
import type { Instrumentation } from "@opentelemetry/instrumentation";
import { AwsInstrumentation } from "@opentelemetry/instrumentation-aws-sdk";
import { ExpressInstrumentation, ExpressLayerType } from "@opentelemetry/instrumentation-express";
import { HttpInstrumentation } from "@opentelemetry/instrumentation-http";
import { PgInstrumentation } from "@opentelemetry/instrumentation-pg";
import { PinoInstrumentation } from "@opentelemetry/instrumentation-pino";

const probePaths = new Set(["/healthz", "/readyz"]);

/** The instrumentations every process loads: http, express, pg, aws-sdk (SQS, EC2) and pino log correlation. */
export function createInstrumentations(): Instrumentation[] {
  return [
    new HttpInstrumentation({
      // Kubelet probes every few seconds would drown real traffic.
      ignoreIncomingRequestHook: (req: IncomingMessage) =>
        probePaths.has((req.url ?? "").split("?")[0] ?? ""),
    }),
    // Route handlers only: a span per middleware and router layer cost the gateway ~10 % of its throughput and
    // says nothing an SRE acts on (the HTTP span carries the route and status).
    new ExpressInstrumentation({ ignoreLayersType: [ExpressLayerType.MIDDLEWARE, ExpressLayerType.ROUTER] }),
    // Only queries inside a request or message span: background polling would otherwise emit a root span per tick.
    new PgInstrumentation({ requireParentSpan: true }),
    new AwsInstrumentation({ suppressInternalInstrumentation: true }),
    new PinoInstrumentation({ disableLogSending: true }),
  ];
}
