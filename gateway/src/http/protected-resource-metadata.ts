import express, { type ErrorRequestHandler, type RequestHandler, type Router } from "express";
import { AppError } from "@cgs/shared";

export const PROTECTED_RESOURCE_METADATA_PATH = "/.well-known/oauth-protected-resource";

export interface ProtectedResourceOptions {
  publicBaseUrl: string;
  /** The OIDC issuer whose tokens the gateway accepts (OIDC_ISSUER). */
  issuer: string;
  limit: RequestHandler;
}

const trimSlash = (url: string) => url.replace(/\/+$/, "");

/**
 * OAuth 2.0 Protected Resource Metadata (RFC 9728): tells SDKs and the CLI which authorization server issues
 * the tokens this API accepts, so where to refresh and sign in is discovered rather than configured.
 */
export function protectedResourceMetadata(options: ProtectedResourceOptions): Router {
  const body = JSON.stringify({
    resource: trimSlash(options.publicBaseUrl),
    authorization_servers: [trimSlash(options.issuer)],
    bearer_methods_supported: ["header"],
    resource_name: "Cloud gaming platform API",
    resource_documentation: `${trimSlash(options.publicBaseUrl)}/openapi.json`,
  });
  const router = express.Router();
  router.get(PROTECTED_RESOURCE_METADATA_PATH, options.limit, (_req, res) => {
    res.setHeader("Cache-Control", "public, max-age=300");
    res.type("application/json").send(body);
  });
  return router;
}

/** RFC 9728 §5.1: a 401 points the client at the metadata, so it can find where to get a token. */
export function bearerChallenge(publicBaseUrl: string): ErrorRequestHandler {
  const challenge = `Bearer resource_metadata="${trimSlash(publicBaseUrl)}${PROTECTED_RESOURCE_METADATA_PATH}"`;
  return (err, _req, _res, next) => {
    if (err instanceof AppError && err.status === 401) err.withHeaders({ "WWW-Authenticate": challenge });
    next(err);
  };
}
