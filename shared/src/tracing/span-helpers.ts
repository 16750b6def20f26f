import { SpanStatusCode, trace, type Span, type SpanOptions, type Context } from "@opentelemetry/api";

export const TRACER_NAME = "@cgs/shared";

export function sharedTracer() {
  return trace.getTracer(TRACER_NAME);
}

/** Marks the span failed with the exception recorded, as every error path should. */
export function recordSpanError(span: Span, err: unknown): void {
  const error = err instanceof Error ? err : new Error(String(err));
  span.recordException(error);
  span.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
}

/** Runs `work` inside a new active span; errors are recorded on it and rethrown; the span always ends. */
export async function withSpan<T>(
  name: string,
  options: SpanOptions & { parent?: Context },
  work: (span: Span) => Promise<T>,
): Promise<T> {
  const { parent, ...spanOptions } = options;
  const run = async (span: Span) => {
    try {
      return await work(span);
    } catch (err) {
      recordSpanError(span, err);
      throw err;
    } finally {
      span.end();
    }
  };
  return parent
    ? sharedTracer().startActiveSpan(name, spanOptions, parent, run)
    : sharedTracer().startActiveSpan(name, spanOptions, run);
}

/**
 * Names the request's server span by its route template (`POST /api/v1/billing/stripe-webhook`), as the Express
 * instrumentation does for routes it matched: for requests answered without Express's router.
 */
export function nameServerSpanByRoute(method: string, route: string): void {
  const span = trace.getActiveSpan();
  if (!span) return;
  span.updateName(`${method} ${route}`);
  span.setAttribute("http.route", route);
}
