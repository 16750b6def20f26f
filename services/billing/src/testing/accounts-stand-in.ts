import http from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A real HTTP stand-in for the accounts service's GET /internal/v1/accounts/me, for billing's tests only
 * (accounts' own tests cover the real endpoint). It reads `sub` from the bearer token without verifying
 * it: billing has already verified that token before it forwards it.
 */
export interface AccountsStandIn {
  url: string;
  /** identityUserIds whose account is in the deletion grace period. */
  pendingDeletion: Set<string>;
  /** When set, every request answers this status (e.g. 500) instead of the account. */
  failWith?: number;
  /** When set, requests are held this long before the answer (timeout tests). */
  delayMs?: number;
  requests: { authorization?: string; path: string }[];
  close(): Promise<void>;
}

function subOf(authorization: string | undefined): string | undefined {
  const token = /^Bearer (.+)$/.exec(authorization ?? "")?.[1];
  const payload = token?.split(".")[1];
  if (!payload) return undefined;
  try {
    return (JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as { sub?: string }).sub;
  } catch {
    return undefined;
  }
}

export async function startAccountsStandIn(): Promise<AccountsStandIn> {
  const standIn: AccountsStandIn = {
    url: "",
    pendingDeletion: new Set(),
    requests: [],
    close: async () => undefined,
  };
  const server = http.createServer((req, res) => {
    standIn.requests.push({ authorization: req.headers.authorization, path: req.url ?? "" });
    const answer = () => {
      if (standIn.failWith) {
        res.writeHead(standIn.failWith, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: "INTERNAL", message: "stand-in failure" }));
        return;
      }
      const sub = subOf(req.headers.authorization);
      if (req.method !== "GET" || req.url !== "/internal/v1/accounts/me" || !sub) {
        res.writeHead(sub ? 404 : 401, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: sub ? "NOT_FOUND" : "UNAUTHENTICATED", message: "stand-in" }));
        return;
      }
      const pending = standIn.pendingDeletion.has(sub);
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          identityUserId: sub,
          pendingDeletion: pending,
          purgeAt: pending ? new Date(Date.now() + 30 * 86_400_000).toISOString() : null,
          preferences: {},
        }),
      );
    };
    if (standIn.delayMs) setTimeout(answer, standIn.delayMs);
    else answer();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  standIn.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  standIn.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return standIn;
}
