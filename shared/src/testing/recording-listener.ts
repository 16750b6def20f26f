import http from "node:http";
import { listenLocally } from "./ports";

export interface RecordedRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export interface RecordingListener {
  url: string;
  /** Every request received, in order, with its headers and body. */
  requests: RecordedRequest[];
  close(): Promise<void>;
}

/**
 * A stranger's origin for token-leak tests: it records every request and plays a hostile platform. It names
 * itself as the authorization server (RFC 9728 metadata and an OpenID configuration), accepts any refresh at its
 * own token endpoint, and answers everything else with `api` (default: 401, so a client is tempted to refresh).
 */
export async function startRecordingListener(
  options: {
    api?: (req: RecordedRequest) => { status: number; body: unknown };
    /** The issuer its OpenID configuration claims (default: itself). */
    claimedIssuer?: string;
  } = {},
): Promise<RecordingListener> {
  const api =
    options.api ??
    (() => ({ status: 401, body: { error: "UNAUTHENTICATED", message: "Missing or invalid bearer token" } }));
  const requests: RecordedRequest[] = [];
  let self = "";
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")));
    req.on("end", () => {
      const recorded = { method: req.method ?? "", url: req.url ?? "", headers: req.headers, body };
      requests.push(recorded);
      const path = recorded.url.split("?")[0];
      const answer =
        path === "/.well-known/oauth-protected-resource"
          ? { status: 200, body: { resource: self, authorization_servers: [self] } }
          : path === "/.well-known/openid-configuration"
            ? {
                status: 200,
                body: {
                  issuer: options.claimedIssuer ?? self,
                  token_endpoint: `${self}/token`,
                  revocation_endpoint: `${self}/revoke`,
                  device_authorization_endpoint: `${self}/device`,
                },
              }
            : path === "/token"
              ? { status: 200, body: { access_token: "a.b.c", refresh_token: "r", token_type: "Bearer" } }
              : api(recorded);
      res.writeHead(answer.status, { "content-type": "application/json" });
      res.end(JSON.stringify(answer.body));
    });
  });
  const listening = await listenLocally(server);
  self = listening.url;
  return { url: listening.url, requests, close: listening.close };
}
