import { AppError } from "@cgs/shared";
import type { AuthKey, KeyKind, PrivateNetwork } from "../adapters/private-network";
import {
  accountKeys,
  dropKey,
  finishKey,
  forgetAccountKeys,
  lockAccountKeys,
  markKeysUsed,
  reserveKey,
  unusedDeviceKeys,
  type RecordedKey,
} from "../data/private-network-repository";
import type { SessionsDb, SessionsTx } from "../data/session-repository";
import type { SessionsDomainDeps } from "./session-deps";

type KeyDeps = Pick<SessionsDomainDeps, "privateNetwork" | "clock"> & { db: SessionsDb };

/** Answered 429 with the seconds until the account's soonest unused key expires. */
export class KeyLimitReached extends Error {
  constructor(readonly retryAfterSeconds: number) {
    super("private-network key limit reached");
  }
}

/**
 * Mints a key for the account, recorded in the sessions database so the account's keys are found without listing
 * the tailnet. Device keys count against `maxLiveDeviceKeys`: under the account's advisory lock (a short
 * transaction, no outside call inside it) the live keys are counted and a place is reserved, so concurrent requests
 * cannot pass the check together; the key is minted after, and the place becomes it (or is dropped on failure).
 * The control plane is asked which keys were used only when the count reaches the limit.
 */
export async function mintAccountKey(
  deps: KeyDeps,
  request: { accountId: string; kind: KeyKind; expirySeconds: number; description: string },
  maxLiveDeviceKeys = Number.POSITIVE_INFINITY,
): Promise<AuthKey> {
  const { db, clock, privateNetwork } = deps;
  const reserve = (): Promise<{ full: RecordedKey[] } | { reserved: string }> =>
    db.transaction(async (tx) => {
      await lockAccountKeys(tx, request.accountId);
      const now = clock.now();
      const live = request.kind === "device" ? await unusedDeviceKeys(tx, request.accountId, now) : [];
      if (live.length >= maxLiveDeviceKeys) return { full: live };
      const expiresAt = new Date(now.getTime() + request.expirySeconds * 1000);
      return {
        reserved: await reserveKey(tx, { accountId: request.accountId, kind: request.kind, expiresAt }),
      };
    });
  let attempt = await reserve();
  if ("full" in attempt) {
    const minted = attempt.full.map((k) => k.keyId).filter((id) => !id.startsWith("pending:"));
    await markKeysUsed(db, [...(await privateNetwork.usedKeys(request.accountId, minted))], clock.now());
    attempt = await reserve();
  }
  if ("full" in attempt) {
    const soonest = Math.min(...attempt.full.map((k) => k.expiresAt.getTime()));
    throw new KeyLimitReached(Math.max(1, Math.ceil((soonest - clock.now().getTime()) / 1000)));
  }
  let key: AuthKey;
  try {
    key = await privateNetwork.createKey(request);
  } catch (err) {
    await dropKey(db, attempt.reserved);
    throw err;
  }
  await finishKey(db, attempt.reserved, { keyId: key.id, expiresAt: key.expiresAt, networkTag: key.tag });
  return key;
}

/** The player's key for the session's private network, or the documented 429 / 503. */
export async function mintDeviceKey(
  deps: SessionsDomainDeps,
  accountId: string,
  sessionId: string,
): Promise<AuthKey> {
  const { keyTtlSeconds, maxLiveKeys } = deps.settings.privateNetwork;
  try {
    return await mintAccountKey(
      deps,
      {
        accountId,
        kind: "device",
        expirySeconds: keyTtlSeconds,
        // Tailscale limits descriptions to 50 letters, digits and dashes.
        description: `cgs-session-${sessionId.slice(0, 8)}`,
      },
      maxLiveKeys,
    );
  } catch (err) {
    if (err instanceof KeyLimitReached) {
      throw AppError.rateLimited(
        err.retryAfterSeconds,
        `At most ${maxLiveKeys} unused private-network keys per account; retry in ${err.retryAfterSeconds} seconds`,
      );
    }
    deps.logger.warn({ err, sessionId }, "private network refused to mint a key");
    throw AppError.unavailable("The private network is unavailable; try again shortly", 5);
  }
}

/**
 * An account purge: every node of the account leaves the private network and every key recorded for it is
 * revoked, inside the purge event's transaction (a failure retries the event). The control plane is called with
 * what the transaction read; nothing else touches the database meanwhile.
 */
export async function purgeAccountNetwork(
  network: PrivateNetwork,
  tx: SessionsTx,
  accountId: string,
): Promise<void> {
  await lockAccountKeys(tx, accountId);
  await network.purgeAccount(accountId, await accountKeys(tx, accountId));
  await forgetAccountKeys(tx, accountId);
}
