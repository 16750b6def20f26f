/**
 * Refusals of nonsense in the stack configuration, each naming the key an operator edits (`cgs:queues.maxReceiveCount`).
 * config.ts refuses what spans the stack; each component refuses nonsense in its own arguments before it creates
 * anything, so `pulumi preview` fails with the key instead of AWS failing halfway through `pulumi up`.
 */

export function fail(message: string): never {
  throw new Error(`invalid stack configuration: ${message}`);
}

const shown = (value: unknown) => JSON.stringify(value) ?? String(value);

export function integerIn(key: string, value: unknown, min: number, max?: number): number {
  if (
    typeof value !== "number" ||
    !Number.isInteger(value) ||
    value < min ||
    (max !== undefined && value > max)
  ) {
    fail(
      `${key} must be an integer ${max === undefined ? `of at least ${min}` : `from ${min} to ${max}`} (got ${shown(value)})`,
    );
  }
  return value;
}

export function matching(key: string, value: unknown, pattern: RegExp, what: string): string {
  if (typeof value !== "string" || !pattern.test(value)) fail(`${key} must be ${what} (got ${shown(value)})`);
  return value;
}

export function oneOf<T extends string>(key: string, value: unknown, allowed: readonly T[]): T {
  if (!allowed.includes(value as T))
    fail(`${key} must be one of ${allowed.join(", ")} (got ${shown(value)})`);
  return value as T;
}

export function nonEmptyList<T>(key: string, value: unknown): T[] {
  if (!Array.isArray(value) || value.length === 0)
    fail(`${key} must be a non-empty list (got ${shown(value)})`);
  return value as T[];
}

export function unique(key: string, values: readonly unknown[]): void {
  const seen = new Set<string>();
  for (const v of values) {
    if (seen.has(shown(v))) fail(`${key} lists ${shown(v)} twice`);
    seen.add(shown(v));
  }
}

/** An IPv4 CIDR such as 10.20.0.0/16, its prefix length within [minBits, maxBits]. */
export function ipv4Cidr(key: string, value: unknown, minBits = 0, maxBits = 32): string {
  const m =
    typeof value === "string" ? /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/.exec(value) : null;
  const octetsOk = m !== null && m.slice(1, 5).every((o) => Number(o) <= 255);
  const bits = m ? Number(m[5]) : NaN;
  if (!octetsOk || !(bits >= minBits && bits <= maxBits)) {
    fail(`${key} must be an IPv4 CIDR from /${minBits} to /${maxBits} (got ${shown(value)})`);
  }
  return value as string;
}

export const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
export const HOST_NAME = /^(?=.{1,253}$)([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/;
export const PORT_MAX = 65_535;

/** A Kubernetes CPU quantity (500m, 1, 1.5) in cores. */
export function cpuCores(key: string, value: unknown): number {
  const m = typeof value === "string" ? /^(\d+(?:\.\d+)?)(m?)$/.exec(value) : null;
  if (!m) fail(`${key} must be a CPU quantity such as 250m or 1 (got ${shown(value)})`);
  return Number(m[1]) / (m[2] ? 1000 : 1);
}

const MEMORY_UNITS: Record<string, number> = {
  "": 1,
  K: 1e3,
  M: 1e6,
  G: 1e9,
  Ki: 1024,
  Mi: 1024 ** 2,
  Gi: 1024 ** 3,
};

/** A Kubernetes memory quantity (128Mi, 1Gi) in bytes. */
export function memoryBytes(key: string, value: unknown): number {
  const m = typeof value === "string" ? /^(\d+)(Ki|Mi|Gi|K|M|G)?$/.exec(value) : null;
  if (!m) fail(`${key} must be a memory quantity such as 256Mi or 1Gi (got ${shown(value)})`);
  return Number(m[1]) * MEMORY_UNITS[m[2] ?? ""]!;
}

/** The first and last address of an IPv4 CIDR (already checked by ipv4Cidr), as unsigned integers. */
function cidrBounds(cidr: string): [number, number] {
  const [address, bits] = cidr.split("/") as [string, string];
  const start = address.split(".").reduce((n, octet) => n * 256 + Number(octet), 0);
  const size = 2 ** (32 - Number(bits));
  const first = start - (start % size);
  return [first, first + size - 1];
}

/** Whether two IPv4 CIDRs share any address. */
export function cidrsOverlap(a: string, b: string): boolean {
  const [aFirst, aLast] = cidrBounds(a);
  const [bFirst, bLast] = cidrBounds(b);
  return aFirst <= bLast && bFirst <= aLast;
}
