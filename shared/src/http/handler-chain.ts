import type { IncomingMessage, RequestListener, ServerResponse } from "node:http";
import type { ErrorRequestHandler, Express, Request, RequestHandler, Response } from "express";

/**
 * Runs a fixed list of Express handlers on every request it is given, without Express's router: the request and
 * response get Express's prototypes (req.ip, req.path, res.json… behave as under `app`, with its settings such
 * as "trust proxy"), then each handler runs in order; an error goes through `errorHandlers` in order.
 *
 * For a hot route with one fixed pipeline (the gateway's API, billing's Stripe webhook), walking Express's layer
 * stack to reach it (every `use` matched against the path, other routes tried first) cost more CPU than the
 * pipeline itself. The handlers are the same functions Express would call, with Express 5's contract: `next(err)` or a rejected
 * promise is an error; the last error handler must answer.
 */
export function handlerChain(
  app: Express,
  handlers: readonly RequestHandler[],
  errorHandlers: readonly ErrorRequestHandler[],
): RequestListener {
  return (rawReq: IncomingMessage, rawRes: ServerResponse): void => {
    const { req, res } = adopt(app, rawReq, rawRes);
    let index = 0;
    let errorIndex = 0;

    const fail = (err: unknown): void => {
      const handler = errorHandlers[errorIndex++];
      if (!handler) {
        // The error handlers passed the error on without answering: never leave the client hanging.
        if (!res.headersSent) res.status(500).end();
        else res.destroy();
        return;
      }
      try {
        const result: unknown = handler(err, req, res, (passed?: unknown) => fail(passed ?? err));
        if (result instanceof Promise) result.catch(fail);
      } catch (thrown) {
        fail(thrown);
      }
    };

    const next = (err?: unknown): void => {
      if (err !== undefined && err !== null) {
        fail(err);
        return;
      }
      const handler = handlers[index++];
      if (!handler) {
        fail(new Error("the handler chain ended without an answer"));
        return;
      }
      try {
        const result: unknown = handler(req, res, next);
        if (result instanceof Promise)
          result.catch((rejected: unknown) => next(rejected ?? new Error("rejected")));
      } catch (thrown) {
        next(thrown);
      }
    };
    next();
  };
}

/** What Express's app.handle does before routing (Express 5): link req and res, give them the app's prototypes. */
function adopt(
  app: Express,
  rawReq: IncomingMessage,
  rawRes: ServerResponse,
): { req: Request; res: Response } {
  const req = rawReq as Request;
  const res = rawRes as Response;
  (req as { res?: Response }).res = res;
  (res as { req?: Request }).req = req;
  Object.setPrototypeOf(req, app.request);
  Object.setPrototypeOf(res, app.response);
  if (!res.locals) res.locals = Object.create(null) as Response["locals"];
  // What the router sets at its root.
  req.baseUrl = "";
  if (!req.originalUrl) req.originalUrl = req.url;
  return { req, res };
}
