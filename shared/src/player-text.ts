/** How services write amounts and times into the messages players read (poll's `message`, error messages). */

/**
 * An amount in minor units: "20.00 USD". Every wallet currency here has two decimals (the contract's amounts are
 * cents); the portal formats for the browser's locale itself.
 */
export function formatMoney(minor: number, currency: string): string {
  const sign = minor < 0 ? "-" : "";
  return `${sign}${(Math.abs(minor) / 100).toFixed(2)} ${currency}`;
}

/** "14:32 UTC": the services do not know the player's time zone; the portal shows such times in local time. */
export const clockTime = (d: Date) => `${d.toISOString().slice(11, 16)} UTC`;
