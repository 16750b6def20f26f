import express, { type Request, type RequestHandler } from "express";
import * as OpenApiValidator from "express-openapi-validator";
import type { HttpMethod, OpenApiDocument } from "@cgs/shared";
import { routeOf, type RawBodyRequest } from "./gateway-locals";
import type { RouteEntry, RouteTable } from "./route-table";

export interface RequestValidationOptions {
  /** The API contract the requests are checked against. */
  openapi: OpenApiDocument;
  /** The route table built from that contract (its entries are what the route lookup leaves on res.locals). */
  table: RouteTable;
  /** Largest JSON body accepted (bytes or "64kb"); past it, 413. */
  bodyLimit: string;
}

/** Whether the operation (or its path) declares parameters or a request body. */
function declaresInputs(doc: OpenApiDocument, route: RouteEntry): boolean {
  const item = doc.paths[route.path];
  const op = item?.[route.method.toLowerCase() as HttpMethod];
  return Boolean(item?.parameters?.length || op?.parameters?.length || op?.requestBody);
}

/**
 * Request validation for the /api/ chain (after the route lookup), two handlers in order: the JSON body, parsed
 * up to bodyLimit with its raw bytes kept for forwarding, then express-openapi-validator against the contract
 * (unknown query parameters refused; failures become 400 VALIDATION_ERROR naming the field). Raw-body operations
 * (the Stripe webhook) are neither parsed nor validated: their service checks the signature over the untouched bytes.
 */
export function createRequestValidation(options: RequestValidationOptions): RequestHandler[] {
  const { openapi: doc, table } = options;
  const jsonParser = express.json({
    limit: options.bodyLimit,
    type: ["application/json", "application/*+json"],
    verify: (req, _res, buf) => {
      (req as RawBodyRequest).rawBody = buf;
    },
  });
  const parseBody: RequestHandler = (req, res, next) =>
    routeOf(res).rawBody ? next() : jsonParser(req, res, next);

  const validator = express.Router();
  validator.use(
    OpenApiValidator.middleware({
      apiSpec: structuredClone(doc) as never,
      validateRequests: { allowUnknownQueryParameters: false },
      validateResponses: false,
      validateSecurity: false,
      validateApiSpec: false,
      ignoreUndocumented: true,
    }),
  );
  // An operation without parameters or body has nothing to check in a request without query or body; the
  // validator's own pass over it was a measurable share of each poll's CPU.
  // The table's own entries (match returns them), so the check makes no key per request.
  const withoutInputs = new Set(table.routes.filter((r) => !declaresInputs(doc, r)));
  const nothingToValidate = (req: Request, route: RouteEntry): boolean =>
    withoutInputs.has(route) &&
    !req.url.includes("?") &&
    (req.headers["content-length"] === undefined || req.headers["content-length"] === "0") &&
    req.headers["transfer-encoding"] === undefined;
  const validate: RequestHandler = (req, res, next) => {
    const route = routeOf(res);
    if (route.rawBody || nothingToValidate(req, route)) next();
    else validator(req, res, next);
  };

  return [parseBody, validate];
}
