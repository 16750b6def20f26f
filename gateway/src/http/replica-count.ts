import { Resolver } from "node:dns/promises";
import type { Logger } from "pino";

/** How many gateway replicas are serving now: while Redis is down each one allows its share of every limit. */
export interface ReplicaCount {
  current(): number;
  /** Stops refreshing (shutdown). */
  close(): void;
}

/** A fixed count (GATEWAY_REPLICAS): one process locally, or the floor when nothing better is known. */
export function staticReplicaCount(count: number): ReplicaCount {
  const n = Math.max(1, Math.floor(count));
  return { current: () => n, close: () => undefined };
}

export interface DnsReplicaCountOptions {
  /** A headless Service's name: one address per ready gateway pod (Kubernetes publishes no others). */
  name: string;
  /** host:port of the DNS server to ask; default the system's (the pod's resolv.conf). */
  server?: string;
  /** Used until the first answer, and kept through failures only if no answer ever came. */
  fallback: number;
  refreshMs?: number;
  logger?: Logger;
}

/**
 * The number of addresses a headless Service resolves to, asked every few seconds (Kubernetes' own DNS TTL is
 * 5 s). It needs nothing but DNS, so it keeps answering while Redis is down. A failed lookup keeps the last answer.
 */
export function dnsReplicaCount(options: DnsReplicaCountOptions): ReplicaCount {
  const resolver = new Resolver({ timeout: 2_000, tries: 2 });
  if (options.server) resolver.setServers([options.server]);
  let count = Math.max(1, Math.floor(options.fallback));
  let failing = false;

  const addresses = async (): Promise<string[]> => {
    try {
      return await resolver.resolve4(options.name);
    } catch (err) {
      // An IPv6-only cluster publishes AAAA records only.
      if ((err as NodeJS.ErrnoException).code !== "ENODATA") throw err;
      return resolver.resolve6(options.name);
    }
  };
  const refresh = () =>
    addresses().then(
      (found) => {
        // This replica is serving, so it counts even if its own record is not published yet.
        count = Math.max(1, found.length);
        if (failing) options.logger?.info({ name: options.name, count }, "gateway replicas resolve again");
        failing = false;
      },
      (err: unknown) => {
        if (!failing)
          options.logger?.warn(
            { err, name: options.name, count },
            "gateway replicas do not resolve; keeping the last count",
          );
        failing = true;
      },
    );
  void refresh();
  const timer = setInterval(() => void refresh(), options.refreshMs ?? 5_000);
  timer.unref();
  return { current: () => count, close: () => clearInterval(timer) };
}
