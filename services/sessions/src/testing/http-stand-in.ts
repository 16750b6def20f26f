import http from "node:http";
import { listenLocally } from "@cgs/shared/testing/ports";

export interface StandInRequest {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: unknown;
}

export interface StandInReply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

export interface HttpStandIn {
  url: string;
  requests: StandInRequest[];
  close(): Promise<void>;
}

/** A real HTTP server on 127.0.0.1:<random> answering JSON through `handle`; records every request. */
export async function startJsonServer(
  handle: (req: StandInRequest) => Promise<StandInReply> | StandInReply,
): Promise<HttpStandIn> {
  const requests: StandInRequest[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const raw = Buffer.concat(chunks).toString("utf8");
      let body: unknown = undefined;
      try {
        body = raw ? JSON.parse(raw) : undefined;
      } catch {
        body = raw;
      }
      const recorded = {
        method: req.method ?? "",
        path: (req.url ?? "").split("?")[0] ?? "",
        headers: req.headers,
        body,
      };
      requests.push(recorded);
      Promise.resolve(handle(recorded))
        .then((reply) => {
          if (reply.body === undefined) {
            res.writeHead(reply.status, reply.headers).end();
          } else {
            res.writeHead(reply.status, { ...reply.headers, "content-type": "application/json" });
            res.end(JSON.stringify(reply.body));
          }
        })
        .catch((err: unknown) => {
          res.writeHead(500, { "content-type": "application/json" });
          res.end(JSON.stringify({ error: "INTERNAL", message: String(err) }));
        });
    });
  });
  return { requests, ...(await listenLocally(server)) };
}

export function bearerOf(headers: http.IncomingHttpHeaders): string | undefined {
  const match = /^Bearer (.+)$/.exec(headers.authorization ?? "");
  return match?.[1];
}
