import { startOwnDnsmasq, type OwnDnsmasq } from "@cgs/shared/testing/own-dnsmasq";
import { dnsReplicaCount, staticReplicaCount } from "./replica-count";

// A real dnsmasq of the test's own publishes the headless Service's records, as Kubernetes' DNS does.
const NAME = "cgs-gateway-peers.cgs.svc.cluster.local";
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let dns: OwnDnsmasq;

beforeAll(async () => {
  dns = await startOwnDnsmasq();
});
afterAll(() => dns?.stop());

async function until(read: () => number, want: number): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (read() !== want && Date.now() < deadline) await sleep(20);
  expect(read()).toBe(want);
}

describe("how many gateway replicas serve", () => {
  test("when the headless Service's records change, then the count follows them; when DNS stops answering, the last count stays", async () => {
    await dns.setRecords(NAME, ["10.0.0.1", "10.0.0.2"]);
    const count = dnsReplicaCount({ name: NAME, server: dns.server, fallback: 2, refreshMs: 50 });
    try {
      await until(count.current, 2);
      await dns.setRecords(NAME, ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5"]);
      await until(count.current, 5);
      await dns.setRecords(NAME, ["10.0.0.1", "10.0.0.2", "10.0.0.3"]);
      await until(count.current, 3);
      const unknown = dnsReplicaCount({
        name: "nobody.cgs.test",
        server: dns.server,
        fallback: 4,
        refreshMs: 50,
      });
      await sleep(200);
      expect(unknown.current()).toBe(4);
      unknown.close();
      await dns.stop();
      await sleep(300);
      expect(count.current()).toBe(3);
    } finally {
      count.close();
    }
  });

  test("when no DNS name is configured, then the static count is used, never below one", () => {
    expect(staticReplicaCount(3).current()).toBe(3);
    expect(staticReplicaCount(0).current()).toBe(1);
  });
});
