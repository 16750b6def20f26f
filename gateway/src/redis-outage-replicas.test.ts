import { randomUUID } from "node:crypto";
import { createClient } from "redis";
import { startOwnDnsmasq, type OwnDnsmasq } from "@cgs/shared/testing/own-dnsmasq";
import { startOwnRedis, type OwnRedis } from "@cgs/shared/testing/own-redis";
import { startTestIdentityProvider, type TestIdentityProvider } from "@cgs/shared/testing/tokens";
import { startTestGateway, type TestGateway } from "../../test/harnesses/gateway-harness";

// Fault: Redis stopped while several gateway replicas share it. The replicas learn how many of them serve from
// DNS (a real dnsmasq of the test's own publishing the headless Service's records, as Kubernetes' DNS would), not
// from GATEWAY_REPLICAS (the autoscaler's floor, 2 here, as in production). Redis is the test's own redis-server.
jest.setTimeout(90_000);

const WRITE_LIMIT = 20;
const PEERS = "cgs-gateway-peers.cgs.svc.cluster.local";
let idp: TestIdentityProvider;
let dns: OwnDnsmasq;

beforeAll(async () => {
  idp = await startTestIdentityProvider();
  dns = await startOwnDnsmasq();
});
afterAll(async () => {
  await dns?.stop();
  await idp?.close();
});

async function replicasSharing(count: number) {
  const redis: OwnRedis = await startOwnRedis();
  // Every pod ready behind the headless Service: one address each.
  await dns.setRecords(
    PEERS,
    Array.from({ length: count }, (_, i) => `10.0.0.${i + 1}`),
  );
  const clients: ReturnType<typeof createClient>[] = [];
  const gateways: TestGateway[] = [];
  for (let i = 0; i < count; i++) {
    const client = createClient({
      url: redis.url,
      disableOfflineQueue: true,
      socket: { connectTimeout: 1_000, reconnectStrategy: () => 200 },
    });
    client.on("error", () => undefined);
    await client.connect();
    clients.push(client);
    gateways.push(
      await startTestGateway(idp, {
        redis: { sendCommand: (args) => client.sendCommand(args) },
        env: {
          GATEWAY_REPLICAS: "2",
          GATEWAY_PEERS_DNS: PEERS,
          GATEWAY_PEERS_DNS_SERVER: dns.server,
          RATE_LIMIT_WRITE: String(WRITE_LIMIT),
          REDIS_COMMAND_TIMEOUT_MS: "200",
        },
      }),
    );
  }
  return {
    redis,
    gateways,
    async close() {
      for (const gw of gateways) await gw.close();
      for (const c of clients) await c.disconnect().catch(() => undefined);
      await redis.stop();
    },
  };
}

async function write(gw: TestGateway, token: string): Promise<number> {
  const res = await fetch(`${gw.url}/api/v1/sessions/vpn-key`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}` },
  });
  await res.arrayBuffer();
  return res.status;
}

describe("fault: Redis stopped under several gateway replicas", () => {
  it.each([2, 5])(
    "when %i replicas share a Redis that stops mid-window, then together they admit no more than the limit",
    async (count) => {
      const fleet = await replicasSharing(count);
      try {
        // Wait until every replica has asked DNS (at start-up) and counts its peers.
        await new Promise((r) => setTimeout(r, 300));
        const token = await idp.sign({ sub: `outage-${count}-${randomUUID()}` });
        // Seven writes through the shared budget, round-robin as a load balancer spreads them.
        const before: number[] = [];
        for (let i = 0; i < 7; i++) before.push(await write(fleet.gateways[i % count]!, token));
        expect(before).toEqual(Array(7).fill(200));

        await fleet.redis.kill();
        // Then every replica is hammered on its own counter.
        const during = await Promise.all(
          fleet.gateways.map(async (gw) => {
            const statuses: number[] = [];
            for (let i = 0; i < WRITE_LIMIT; i++) statuses.push(await write(gw, token));
            return statuses;
          }),
        );
        const admitted = 7 + during.flat().filter((s) => s === 200).length;
        // Exact here: each replica continues from the count Redis last gave it, and each of its hits weighs
        // `count`. (The tolerance: a replica whose last answer was stale by k hits over-admits k / count.)
        expect(admitted).toBeLessThanOrEqual(WRITE_LIMIT);
        expect(admitted).toBeGreaterThanOrEqual(WRITE_LIMIT - count);
        expect(during.flat().filter((s) => s !== 200 && s !== 429)).toEqual([]);
      } finally {
        await fleet.close();
      }
    },
  );
});
