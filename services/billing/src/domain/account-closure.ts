import { lockActiveHoldsOfAccount } from "../data/hold-repository";
import { lockWallet, markWalletClosed, type BillingTransaction } from "../data/wallet-repository";
import type { BillingDeps } from "./billing-deps";
import { releaseHoldInTransaction } from "./start-authorization";

/**
 * account.purge: the wallet closes (no top-ups, starts or storage charges afterwards) and its holds are
 * released. The wallet row and the ledger stay: accounting must keep them (README, retention).
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
  deps.logger.info({ accountId, balance: wallet.balance }, "wallet closed on account purge");
}
