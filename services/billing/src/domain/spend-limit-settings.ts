import { updateWalletSettings } from "../data/wallet-repository";
import type { BillingDeps } from "./billing-deps";
import { reforecastAccount } from "./metering";
import { spendLimitsView, type SpendLimitsView } from "./spend-limits";
import { lockOrCreateWallet, readWallet } from "./wallets";

/** GET /credits/limits: the limits, what was spent in the current UTC day and month, and when each resets. */
export async function getSpendLimits(deps: BillingDeps, accountId: string): Promise<SpendLimitsView> {
  return spendLimitsView(await readWallet(deps, accountId), deps.clock.now());
}

export interface SpendLimitsPatch {
  /** Minor units per UTC day; null removes the limit. */
  daily?: number | null;
  monthly?: number | null;
}

/**
 * PATCH /credits/limits. A running session is forecast again at once: a lowered limit warns now (or stops the
 * session at its next minute if already passed), a raised one takes the warning away.
 */
export async function updateSpendLimits(
  deps: BillingDeps,
  accountId: string,
  patch: SpendLimitsPatch,
): Promise<SpendLimitsView> {
  const wallet = await deps.db.transaction(async (tx) => {
    const locked = await lockOrCreateWallet(tx, deps, accountId);
    await updateWalletSettings(tx, locked, {
      ...(patch.daily !== undefined ? { dailySpendLimit: patch.daily } : {}),
      ...(patch.monthly !== undefined ? { monthlySpendLimit: patch.monthly } : {}),
    });
    return locked;
  });
  await reforecastAccount(deps, accountId);
  return spendLimitsView(wallet, deps.clock.now());
}
