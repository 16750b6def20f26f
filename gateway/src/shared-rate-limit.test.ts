import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import path from "node:path";
import { startOwnRedis } from "@cgs/shared/testing/own-redis";
import { startTestIdentityProvider, type TestIdentityProvider } from "@cgs/shared/testing/tokens";
import {
  closedPortUrl,
  connectRedis,
  gatewayTestEnv,
  startFakeUpstream,
  startTestGateway,
  type FakeUpstream,
  type TestGateway,
} from "../../test/harnesses/gateway-harness";

const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
const repoRoot = path.resolve(__dirname, "..", "..");

let idp: TestIdentityProvider;
beforeAll(async () => {
  idp = await startTestIdentityProvider();
});
afterAll(() => idp.close());

async function write(baseUrl: string, token: string): Promise<{ status: number; remaining: string | null }> {
  const res = await fetch(`${baseUrl}/api/v1/sessions/vpn-key`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}` },
  });
  await res.arrayBuffer();
  return { status: res.status, remaining: res.headers.get("x-ratelimit-remaining") };
}

describe("rate limits shared through Redis", () => {
  it("when two gateway instances share Redis, then an account has one write budget across both", async () => {
    const clients = [await connectRedis(REDIS_URL), await connectRedis(REDIS_URL)];
    const gateways: TestGateway[] = [];
    try {
      for (const client of clients) {
        gateways.push(
          await startTestGateway(idp, { redis: { sendCommand: (args) => client.sendCommand(args) } }),
        );
      }
      const token = await idp.sign({ sub: `shared-${randomUUID()}` });
      const results = [];
      for (let i = 0; i < 21; i++) results.push(await write(gateways[i % 2]!.url, token));
      expect(results.slice(0, 20).map((r) => r.status)).toEqual(Array(20).fill(200));
      expect(results.slice(0, 20).map((r) => r.remaining)).toEqual(
        Array.from({ length: 20 }, (_, i) => String(19 - i)),
      );
      expect(results[20]!.status).toBe(429);
      const otherAccount = await write(gateways[1]!.url, await idp.sign({ sub: `shared-${randomUUID()}` }));
      expect(otherAccount).toEqual({ status: 200, remaining: "19" });
    } finally {
      await Promise.all(gateways.map((g) => g.close()));
      await Promise.all(clients.map((c) => c.quit()));
    }
  });

  describe("with two gateway processes", () => {
    const children: ChildProcess[] = [];
    let upstream: FakeUpstream;
    afterAll(async () => {
      for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
      await upstream?.close();
    });

    async function startProcess(redisUrl = REDIS_URL): Promise<{ url: string; child: ChildProcess }> {
      const env = {
        ...process.env,
        ...gatewayTestEnv(idp, {
          sessions: upstream.url,
          billing: upstream.url,
          accounts: upstream.url,
          "auth-proxy": upstream.url,
        }),
        LOG_LEVEL: "info",
        REDIS_URL: redisUrl,
        // Two gateways on one machine: each takes a free metrics port.
        METRICS_PORT: "0",
        TSX_TSCONFIG_PATH: path.join(repoRoot, "tsconfig.test.json"),
      };
      const child = spawn(process.execPath, ["--import", "tsx", path.join(repoRoot, "gateway/src/main.ts")], {
        cwd: repoRoot,
        env,
        stdio: ["ignore", "pipe", "pipe"],
      });
      children.push(child);
      const url = await new Promise<string>((resolve, reject) => {
        let out = "";
        let err = "";
        const timer = setTimeout(
          () => reject(new Error(`gateway process did not start:\n${out}\n${err}`)),
          30_000,
        );
        child.stderr!.on("data", (c: Buffer) => (err += c.toString()));
        child.stdout!.on("data", (c: Buffer) => {
          out += c.toString();
          const match = /"url":"(http:\/\/[^"]+)","msg":"listening"/.exec(out);
          if (match) {
            clearTimeout(timer);
            resolve(match[1]!);
          }
        });
        child.once("exit", (code) =>
          reject(new Error(`gateway process exited with ${code}:\n${out}\n${err}`)),
        );
      });
      return { url, child };
    }

    it("when requests alternate between the two processes, then the 21st write answers 429 and SIGTERM drains both", async () => {
      upstream = await startFakeUpstream("any");
      const [a, b] = await Promise.all([startProcess(), startProcess()]);
      const token = await idp.sign({ sub: `proc-${randomUUID()}` });
      const statuses: number[] = [];
      for (let i = 0; i < 21; i++) statuses.push((await write((i % 2 === 0 ? a : b).url, token)).status);
      expect(statuses.slice(0, 20)).toEqual(Array(20).fill(200));
      expect(statuses[20]).toBe(429);

      const exits = [a, b].map((p) => new Promise<number | null>((resolve) => p.child.once("exit", resolve)));
      a.child.kill("SIGTERM");
      b.child.kill("SIGTERM");
      expect(await Promise.all(exits)).toEqual([0, 0]);
    });

    it("when Redis is unreachable, then the gateway serves with its own counters and SIGTERM still stops it", async () => {
      upstream ??= await startFakeUpstream("any");
      const nobody = new URL(await closedPortUrl());
      const gateway = await startProcess(`redis://${nobody.host}`);
      const token = await idp.sign({ sub: `no-redis-${randomUUID()}` });
      expect(await write(gateway.url, token)).toEqual({ status: 200, remaining: "19" });

      const exited = new Promise<number | null>((resolve) => gateway.child.once("exit", resolve));
      const started = Date.now();
      gateway.child.kill("SIGTERM");
      expect(await exited).toBe(0);
      // Well inside the drain grace (10 s) and a pod's termination grace: nothing waits for Redis.
      expect(Date.now() - started).toBeLessThan(5_000);
    });

    it("when Redis hangs, then SIGTERM stops the gateway without waiting for Redis's answer", async () => {
      upstream ??= await startFakeUpstream("any");
      const own = await startOwnRedis();
      try {
        const gateway = await startProcess(own.url);
        const token = await idp.sign({ sub: `hung-redis-${randomUUID()}` });
        expect((await write(gateway.url, token)).status).toBe(200);
        own.hang();

        const exited = new Promise<number | null>((resolve) => gateway.child.once("exit", resolve));
        const started = Date.now();
        gateway.child.kill("SIGTERM");
        expect(await exited).toBe(0);
        expect(Date.now() - started).toBeLessThan(5_000);
      } finally {
        own.resume();
        await own.stop();
      }
    });
  });
});
