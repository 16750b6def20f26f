import type { IncomingMessage, RequestListener, ServerResponse } from "node:http";
import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";

const PROBES = new Set(["/healthz", "/readyz"]);
const tracer = trace.getTracer("cgs-gateway");

/**
 * One SERVER span per request, made here rather than by the HTTP instrumentation (main.ts turns that off with
 * takeOverHttpServerSpans): it continues the caller's trace (traceparent), is the active context while the
 * request is served (so logs carry its trace id and forwarded requests carry it on), is renamed by the API's
 * route once resolved, and ends with the status. Probes get none, as before. Where something else already
 * opened a span for the request (the instrumentation still on), that span is used and none is added.
 * Without telemetry the OpenTelemetry API is a no-op and this costs next to nothing.
 */
export function withServerSpans(listener: RequestListener): RequestListener {
  return (req: IncomingMessage, res: ServerResponse): void => {
    const url = req.url ?? "";
    const query = url.indexOf("?");
    const path = query === -1 ? url : url.slice(0, query);
    if (PROBES.has(path) || trace.getActiveSpan() !== undefined) {
      listener(req, res);
      return;
    }
    const parent = propagation.extract(ROOT_CONTEXT, req.headers);
    const method = req.method ?? "GET";
    const span = tracer.startSpan(
      method,
      {
        kind: SpanKind.SERVER,
        attributes: { "http.request.method": method, "url.path": path, "url.scheme": "http" },
      },
      parent,
    );
    // A span the sampler left out records nothing: it needs no attributes and no listener to end it.
    if (span.isRecording()) {
      const userAgent = req.headers["user-agent"];
      if (userAgent) span.setAttribute("user_agent.original", userAgent);
      res.once("close", () => {
        span.setAttribute("http.response.status_code", res.statusCode);
        if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
        else if (!res.writableFinished) span.setStatus({ code: SpanStatusCode.ERROR, message: "aborted" });
        span.end();
      });
    }
    context.with(trace.setSpan(parent, span), () => listener(req, res));
  };
}
