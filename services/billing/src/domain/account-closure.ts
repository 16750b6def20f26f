import { lockActiveHoldsOfAccount } from "../data/hold-repository";
import { lockWallet, markWalletClosed, type BillingTransaction } from "../data/wallet-repository";
import { retireActiveCard } from "../data/card-repository";
import { turnOffAutoRecharge } from "./auto-recharge";
import type { BillingDeps } from "./billing-deps";
import { releaseHoldInTransaction } from "./start-authorization";

/**
 * account.purge: the wallet closes (no top-ups, starts, storage charges or recharges afterwards), its holds are
 * released and its saved card is removed. The wallet row and the ledger stay: accounting must keep them (README, retention).
 * Minutes of a session still running are charged when its session.stopped arrives.
 */
export async function closeWallet(
  tx: BillingTransaction,
  deps: BillingDeps,
  accountId: string,
): Promise<void> {
  const wallet = await lockWallet(tx, accountId);
  if (!wallet || wallet.status === "closed") return;
  const holds = await lockActiveHoldsOfAccount(tx, accountId);
  for (const hold of holds) await releaseHoldInTransaction(tx, wallet, hold);
  await markWalletClosed(tx, accountId, deps.clock.now());
  // No card is charged for a closed wallet, and none is kept: the recharge worker detaches it from Stripe.
  await turnOffAutoRecharge(tx, wallet, "Turned off because the account is being deleted.");
  await retireActiveCard(tx, accountId, deps.clock.now());
  deps.logger.info({ accountId, balance: wallet.balance }, "wallet closed on account purge");
}
