import http from "node:http";
import { listenLocally } from "../testing/ports";
import { createAccountsClient } from "./accounts-client";

// A real HTTP server standing in for the accounts service, answering what each test sets.
let reply: { status: number; body?: unknown; delayMs?: number } = { status: 200 };
const seen: Array<{ path: string; authorization?: string }> = [];
const server = http.createServer((req, res) => {
  seen.push({ path: req.url ?? "", authorization: req.headers.authorization });
  setTimeout(() => {
    res.writeHead(reply.status, { "content-type": "application/json" });
    res.end(reply.body === undefined ? "" : JSON.stringify(reply.body));
  }, reply.delayMs ?? 0);
});
let accounts: { url: string; close(): Promise<void> };

beforeAll(async () => {
  accounts = await listenLocally(server);
});
afterAll(() => accounts.close());

const client = () => createAccountsClient({ baseUrl: accounts.url, timeoutMs: 300 });
const status = {
  identityUserId: "u-1",
  pendingDeletion: true,
  purgeAt: "2026-06-01T00:00:00.000Z",
  preferences: {},
};

describe("shared accounts client (sessions and billing)", () => {
  it("when accounts answers, then the caller's own token is forwarded and the status comes back", async () => {
    reply = { status: 200, body: status };
    await expect(client().getStatus("token-abc")).resolves.toMatchObject({ pendingDeletion: true });
    expect(seen.at(-1)).toEqual({ path: "/internal/v1/accounts/me", authorization: "Bearer token-abc" });
  });

  it("when accounts fails, is too slow or answers nonsense, then 503 UNAVAILABLE", async () => {
    for (const r of [
      { status: 500 },
      { status: 200, body: status, delayMs: 1_000 },
      { status: 200, body: {} },
    ]) {
      reply = r;
      await expect(client().getStatus("t")).rejects.toMatchObject({ code: "UNAVAILABLE", status: 503 });
    }
  });

  it("when accounts refuses the token, then the caller gets 401", async () => {
    reply = { status: 401, body: { error: "UNAUTHENTICATED" } };
    await expect(client().getStatus("t")).rejects.toMatchObject({ status: 401 });
  });
});
