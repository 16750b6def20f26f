export const storageTierNames = ["none", "basic", "standard", "premium"] as const;
export type StorageTierName = (typeof storageTierNames)[number];

export interface StorageTier {
  tier: StorageTierName;
  sizeGb: number;
  /** Minor units per billing period (calendar month, UTC). */
  pricePerPeriod: number;
}

export type StorageTiers = Record<StorageTierName, StorageTier>;

/** Parses `tier:sizeGb:price,...`; every tier must be listed once and `none` must be free and empty. */
export function parseStorageTiers(text: string): StorageTiers {
  const tiers: Partial<StorageTiers> = {};
  for (const item of text
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)) {
    const [name, size, price, ...rest] = item.split(":");
    if (rest.length > 0 || name === undefined || size === undefined || price === undefined) {
      throw new Error(`"${item}" is not tier:sizeGb:pricePerPeriod`);
    }
    if (!(storageTierNames as readonly string[]).includes(name)) {
      throw new Error(`unknown tier "${name}" (allowed: ${storageTierNames.join(", ")})`);
    }
    const sizeGb = Number(size);
    const pricePerPeriod = Number(price);
    if (!Number.isInteger(sizeGb) || sizeGb < 0 || !Number.isInteger(pricePerPeriod) || pricePerPeriod < 0) {
      throw new Error(`"${item}": size and price must be non-negative integers`);
    }
    const tier = name as StorageTierName;
    if (tiers[tier]) throw new Error(`tier "${tier}" is listed twice`);
    tiers[tier] = { tier, sizeGb, pricePerPeriod };
  }
  const missing = storageTierNames.filter((t) => !tiers[t]);
  if (missing.length > 0) throw new Error(`missing tier(s): ${missing.join(", ")}`);
  if (tiers.none!.sizeGb !== 0 || tiers.none!.pricePerPeriod !== 0) {
    throw new Error(`tier "none" must be none:0:0`);
  }
  return tiers as StorageTiers;
}

export interface BillingPeriod {
  start: Date;
  end: Date;
  /** Stable key of the period, e.g. `2026-11`. */
  key: string;
}

/** The calendar month (UTC) containing `at`: start inclusive, end exclusive. */
export function billingPeriodAt(at: Date): BillingPeriod {
  const start = new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1));
  const end = new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1));
  const key = `${start.getUTCFullYear()}-${String(start.getUTCMonth() + 1).padStart(2, "0")}`;
  return { start, end, key };
}
