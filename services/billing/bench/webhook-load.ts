// The webhook benchmark's load generator, forked by billing-bench.ts so that the server's process does not also
// carry the client's work (like wrk for the gateway bench). It receives the pre-signed deliveries over IPC,
// posts each once over keep-alive connections at the given concurrency and answers the elapsed time.
import http from "node:http";

export interface LoadRequest {
  url: string;
  concurrency: number;
  deliveries: { payload: string; signature: string }[];
}

export interface LoadReply {
  seconds: number;
  /** This process's CPU over the run, in ms: the generator's own share of the machine. */
  cpuMs: number;
  failures: number;
  statuses: Record<string, number>;
}

function post(agent: http.Agent, target: URL, payload: string, signature: string): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    const req = http.request(
      target,
      {
        method: "POST",
        agent,
        headers: {
          "content-type": "application/json",
          "content-length": Buffer.byteLength(payload),
          "stripe-signature": signature,
        },
      },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      },
    );
    req.on("error", reject);
    req.end(payload);
  });
}

async function deliverAll({ url, concurrency, deliveries }: LoadRequest): Promise<LoadReply> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const target = new URL(url);
  const statuses: Record<string, number> = {};
  let next = 0;
  let failures = 0;
  const worker = async () => {
    while (next < deliveries.length) {
      const { payload, signature } = deliveries[next++]!;
      const status = await post(agent, target, payload, signature).catch(() => 0);
      statuses[status] = (statuses[status] ?? 0) + 1;
      if (status !== 200) failures += 1;
    }
  };
  const began = performance.now();
  const cpu = process.cpuUsage();
  await Promise.all(Array.from({ length: concurrency }, worker));
  const seconds = (performance.now() - began) / 1000;
  const used = process.cpuUsage(cpu);
  agent.destroy();
  return { seconds, cpuMs: (used.user + used.system) / 1000, failures, statuses };
}

process.on("message", (request: LoadRequest) => {
  deliverAll(request).then(
    (reply) => process.send?.(reply),
    (err: unknown) => {
      process.stderr.write(`load generator failed: ${String(err)}\n`);
      process.exit(1);
    },
  );
});
