import { context as contextApi, ROOT_CONTEXT, type Context } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";

export type TraceCarrier = Record<string, string>;

// W3C explicitly (not the global propagator) so traceparent travels even where no SDK registered one.
const propagator = new W3CTraceContextPropagator();

const setter = {
  set(carrier: TraceCarrier, key: string, value: string) {
    carrier[key] = value;
  },
};

const getter = {
  get(carrier: TraceCarrier, key: string) {
    return carrier[key];
  },
  keys(carrier: TraceCarrier) {
    return Object.keys(carrier);
  },
};

/** `traceparent` (and `tracestate`) of the given or active context; empty when no span is active. */
export function injectTraceCarrier(ctx: Context = contextApi.active()): TraceCarrier {
  const carrier: TraceCarrier = {};
  propagator.inject(ctx, carrier, setter);
  return carrier;
}

export function extractTraceContext(carrier: TraceCarrier, base: Context = ROOT_CONTEXT): Context {
  return propagator.extract(base, carrier, getter);
}

export const traceCarrierFields = propagator.fields();
