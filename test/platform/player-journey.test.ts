import { accountNetworkName } from "@cgs/shared";
import { headscaleBinaries, startTailscaleNode } from "@cgs/shared/testing/headscale";
import { waitUntil } from "@cgs/shared/testing/queue";
import {
  callApi,
  fastJourneyEnv,
  launchPlatform,
  localToken,
  type LaunchedPlatform,
} from "./launch-platform";

// A player's whole journey over the running platform (`npm start`): one origin, real Keycloak token, the local
// Stripe checkout page, the cloud simulator, a real Headscale whose key a real tailscaled joins with, metering over
// SQS (moto), and the deletion grace.
let platform: LaunchedPlatform;
let token: string;

beforeAll(async () => {
  platform = await launchPlatform({
    gatewayPort: 18180,
    servicePortBase: 18201,
    env: fastJourneyEnv(`journey-${Date.now()}-`),
  });
  token = localToken(`journey-${Date.now()}@example.com`);
}, 180_000);

afterAll(() => platform.cleanup());

const api = <T = Record<string, unknown>>(method: string, path: string, body?: unknown) =>
  callApi<T>(platform.base, token, method, path, body);

interface Poll {
  state: string;
  ready: boolean;
  instanceId: string | null;
  privateNetIp: string | null;
  startedAt: string | null;
}

describe("a player's journey through the gateway", () => {
  test("when the wallet is empty, then a start is refused with 402 and nothing runs", async () => {
    const credits = await api<{ balance: number; currency: string }>("GET", "/credits/me");
    expect(credits.status).toBe(200);
    expect(credits.body.balance).toBe(0);
    const start = await api("POST", "/sessions/start");
    expect(start.status).toBe(402);
    expect(start.body.error).toBe("INSUFFICIENT_CREDITS");
    const poll = await api<Poll>("GET", "/sessions/poll");
    expect(poll.body).toMatchObject({ state: "idle", ready: false, instanceId: null });
  });

  test("when the player tops up and pays on the checkout page, then the balance rises by the amount paid", async () => {
    const topup = await api<{ checkoutUrl: string; checkoutSessionId: string }>("POST", "/credits/topup", {
      amount: 2000,
    });
    expect(topup.status).toBe(200);
    const page = await fetch(topup.body.checkoutUrl);
    expect(page.status).toBe(200);
    const paid = await fetch(`${topup.body.checkoutUrl}/pay`, { method: "POST", redirect: "manual" });
    expect(paid.status).toBe(303);
    const credits = await waitUntil(
      async () => {
        const res = await api<{ balance: number }>("GET", "/credits/me");
        return res.body.balance > 0 ? res.body : undefined;
      },
      { timeoutMs: 10_000, description: "the top-up credited" },
    );
    const storage = await api<{ pricePerPeriod: number; status: string }>("GET", "/billing/storage");
    // The month's storage charge is taken from the first credit; the rest is playable balance.
    const storageCharge = storage.body.status === "paid" ? storage.body.pricePerPeriod : 0;
    expect(credits.balance).toBe(2000 - storageCharge);
  });

  test("when a session is started, polled until ready, paired, connected and stopped, then the minutes are charged", async () => {
    const before = (await api<{ balance: number }>("GET", "/credits/me")).body.balance;
    const start = await api<Poll>("POST", "/sessions/start", undefined);
    expect(start.status).toBe(200);
    expect(start.body.state).toBe("starting");

    const again = await api("POST", "/sessions/start");
    expect(again.status).toBe(409);
    expect(again.body.error).toBe("SESSION_ALREADY_RUNNING");

    const ready = await waitUntil(
      async () => {
        const poll = await api<Poll>("GET", "/sessions/poll");
        return poll.body.state === "running" && poll.body.ready ? poll.body : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 250, description: "the session running and ready" },
    );
    expect(ready.instanceId).toEqual(expect.any(String));

    const pair = await api<{ pin: string; expiresAt: string }>("POST", "/sessions/pair");
    expect(pair.status).toBe(200);
    expect(pair.body.pin).toMatch(/^[0-9]{4}$/);
    const connect = await api<{ privateNetIp: string; port: number }>("GET", "/sessions/connect");
    expect(connect.status).toBe(200);
    expect(connect.body.privateNetIp).toBe(ready.privateNetIp);
    const vpn = await api<{ key: string; expiresAt: string; loginServer: string }>(
      "POST",
      "/sessions/vpn-key",
    );
    expect(vpn.status).toBe(200);
    expect(vpn.body.loginServer).toBe(platform.headscale.url);
    // A real device joins the platform's Headscale with that key, as the player's account's own node.
    const device = await startTailscaleNode(await headscaleBinaries(), "journey-phone");
    try {
      await device.join(vpn.body.key, vpn.body.loginServer, { shieldsUp: true });
      expect((await device.status()).ip).toMatch(/^100\./);
      const sub = JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString("utf8")).sub as string;
      const nodes = await fetch(`${platform.headscale.url}/api/v1/node?user=${accountNetworkName(sub)}`, {
        headers: { authorization: `Bearer ${platform.headscale.apiKey}` },
      }).then((r) => r.json() as Promise<{ nodes: Array<{ name: string; online: boolean }> }>);
      expect(nodes.nodes.filter((n) => n.name === "journey-phone")).toEqual([
        expect.objectContaining({ online: true }),
      ]);
    } finally {
      await device.stop();
    }

    const stop = await api<Poll>("POST", "/sessions/stop");
    expect(stop.status).toBe(200);
    await waitUntil(
      async () => ((await api<Poll>("GET", "/sessions/poll")).body.state === "stopped" ? true : undefined),
      { timeoutMs: 20_000, intervalMs: 250, description: "the session stopped" },
    );
    // session.started/stopped travel over SQS to billing, which charges every started minute.
    const after = await waitUntil(
      async () => {
        const credits = await api<{ balance: number; ratePerMinute: number }>("GET", "/credits/me");
        return credits.body.balance < before ? credits.body : undefined;
      },
      { timeoutMs: 20_000, description: "the played minute charged" },
    );
    expect(before - after.balance).toBe(after.ratePerMinute);
  }, 90_000);

  test("when the session was started, then one trace runs from the gateway through sessions and SQS into billing", async () => {
    await waitUntil(
      () => {
        const spans = platform.traces.spans();
        const traceIds = (service: string) =>
          new Set(spans.filter((s) => s.serviceName === service).map((s) => s.traceId));
        const gateway = traceIds("gateway");
        const sessions = traceIds("sessions");
        return spans.some(
          (s) =>
            s.serviceName === "billing" && s.kind === 5 && gateway.has(s.traceId) && sessions.has(s.traceId),
        );
      },
      { timeoutMs: 15_000, description: "a billing consumer span in the trace of a gateway request" },
    ).catch((err: unknown) => {
      const summary = platform.traces
        .spans()
        .filter((s) => s.kind !== 1)
        .map((s) => `${s.serviceName} ${s.kind} ${s.traceId.slice(0, 8)} ${s.name}`);
      throw new Error(`${String(err)}\n${summary.join("\n")}`);
    });
  });

  test("when the account is scheduled for deletion, then starts and top-ups are refused during the grace", async () => {
    const deletion = await api<{ purgeAt: string }>("DELETE", "/account/delete");
    expect(deletion.status).toBe(202);
    const purgeAt = new Date(deletion.body.purgeAt).getTime();
    expect(purgeAt - Date.now()).toBeGreaterThan(29 * 24 * 3600 * 1000);
    const start = await api("POST", "/sessions/start");
    expect(start.status).toBe(409);
    expect(start.body.error).toBe("ACCOUNT_PENDING_DELETION");
    const topup = await api("POST", "/credits/topup", { amount: 1000 });
    expect(topup.status).toBe(409);
    expect(topup.body.error).toBe("ACCOUNT_PENDING_DELETION");
  });
});
